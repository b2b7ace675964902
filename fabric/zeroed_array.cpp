#include "fabric/zeroed_array.hpp"

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

#include <sys/mman.h>

namespace wafersim::fabric {

namespace {
constexpr std::size_t kPage = 4096;
constexpr std::size_t kHugePage = std::size_t{2} << 20;  // a transparent huge page
}  // namespace

ZeroedPages::ZeroedPages(std::size_t bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Transparent huge pages where the kernel allows them (its `enabled`
  // setting `always` or `madvise`; a kernel without them refuses the
  // advice, and the mapping keeps 4 KiB pages): a run's first pass over
  // the records then takes a fault per 2 MiB, not per 4 KiB, and on a
  // virtual machine whose page faults are dear they were about a third of a
  // first token's host time (docs/performance.md, "Huge pages for the records",
  // 2026-12-03: 405B 1.13x faster in all, a first token 1.25-2.5x). A 26-wafer
  // run measured 2.6x slower with them on 2026-11-23, on a machine whose
  // kernel compacted memory for them; where that happens, the kernel's
  // `defrag` setting, not this code, is the remedy.
  if (bytes >= kHugePage) (void)madvise(p, bytes, MADV_HUGEPAGE);
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

PagePool::Block PagePool::take(std::size_t bytes) {
  for (std::vector<Block>* list : {&fresh_, &used_})
    for (std::size_t i = 0; i < list->size(); ++i) {
      if ((*list)[i].pages.bytes() != bytes) continue;
      Block block = std::move((*list)[i]);
      list->erase(list->begin() + static_cast<std::ptrdiff_t>(i));
      if (list == &used_) ++reused_;
      return block;
    }
  ++made_;
  return Block{ZeroedPages(bytes), 0};
}

void PagePool::give(ZeroedPages pages, std::uint64_t tag) {
  if (pages.data()) used_.push_back(Block{std::move(pages), tag});
}

std::vector<PageRange> PagePool::stock(int count, std::size_t bytes) {
  std::vector<PageRange> ranges;
  for (int i = 0; i < count; ++i) {
    fresh_.push_back(Block{ZeroedPages(bytes), 0});
    ++made_;
    ranges.push_back({fresh_.back().pages.data(), fresh_.back().pages.bytes()});
  }
  return ranges;
}

namespace {

// The whole pages inside each range (madvise takes page-aligned ranges).
std::vector<PageRange> whole_pages(std::vector<PageRange> ranges) {
  std::vector<PageRange> pages;
  for (const PageRange& r : ranges) {
    const auto a = reinterpret_cast<std::uintptr_t>(r.data);
    const std::uintptr_t first = (a + kPage - 1) & ~(kPage - 1);
    const std::uintptr_t last = (a + r.bytes) & ~(kPage - 1);
    if (last > first) pages.push_back({reinterpret_cast<void*>(first), last - first});
  }
  return pages;
}
}  // namespace

PagePrefaulter::PagePrefaulter(std::vector<PageRange> ranges)
    : ranges_(whole_pages(std::move(ranges))), thread_([this] { run(); }) {}

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
      // And a byte of each page read: on a virtual machine the first access
      // from user space can cost more than the kernel's fault. On the 2-core
      // box, writing 190 MB populated so took 0.23 s the first time and
      // 0.007 s once another thread had read a byte of each page.
      for (std::size_t b = 0; b < n; b += kPage)
        (void)*static_cast<volatile const char*>(p + off + b);
      done_.fetch_add(n, std::memory_order_relaxed);
    }
  }
#endif
}

}  // namespace wafersim::fabric
