#include "fabric/zeroed_array.hpp"

#include <new>
#include <utility>

#include <sys/mman.h>

namespace wafersim::fabric {

ZeroedPages::ZeroedPages(std::size_t bytes) {
  if (bytes == 0) return;
  // Plain 4 KiB pages: asking for transparent huge pages (MADV_HUGEPAGE)
  // made a 26-wafer run 2.6x slower on the benchmark machine, where the
  // kernel compacts memory on each huge-page fault (defrag = madvise).
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = p;
  bytes_ = bytes;
}

ZeroedPages::~ZeroedPages() {
  if (data_) munmap(data_, bytes_);
}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, bytes_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

}  // namespace wafersim::fabric
