#include "fabric/zeroed_array.hpp"

#include <algorithm>
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

PagePrefaulter::PagePrefaulter(std::vector<PageRange> ranges)
    : ranges_(std::move(ranges)), thread_([this] { run(); }) {}

PagePrefaulter::~PagePrefaulter() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void PagePrefaulter::wait() {
  if (thread_.joinable()) thread_.join();
}

void PagePrefaulter::run() {
#if defined(MADV_POPULATE_WRITE)
  constexpr std::size_t kChunk = std::size_t{2} << 20;  // stop checks every 2 MiB
  for (const PageRange& r : ranges_) {
    auto* p = static_cast<char*>(r.data);
    for (std::size_t off = 0; off < r.bytes; off += kChunk) {
      if (stop_.load(std::memory_order_relaxed)) return;
      const std::size_t n = std::min(kChunk, r.bytes - off);
      if (madvise(p + off, n, MADV_POPULATE_WRITE) != 0) return;  // not supported: give up
      done_.fetch_add(n, std::memory_order_relaxed);
    }
  }
#endif
}

}  // namespace wafersim::fabric
