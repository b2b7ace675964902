// A large fixed-size array whose elements start as all-zero bytes, taken from
// the operating system already zeroed (an anonymous mapping) instead of being
// written by a constructor. Used for the per-link records of a wafer (3.58M
// x 40 bytes on a WSE-3): a std::vector value-initialises them with a memset
// that faults in every page at once (most of a 26-wafer placement's time was
// those faults), although the kernel hands out zeroed pages anyway. Here a
// page is faulted in (and zeroed, once) when the simulation first touches
// it, and pages it never touches (about a tenth of a wafer's link records
// under Llama-3.1-405B) cost no memory. A mapping of 2 MiB or more asks for
// transparent huge pages, so a page is then 2 MiB where the kernel gives
// them (405B's peak resident memory measured the same either way).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace wafersim::fabric {

// An anonymous, zero-filled mapping of `bytes` bytes (none for 0), page
// aligned. Throws std::bad_alloc when the mapping fails.
class ZeroedPages {
 public:
  explicit ZeroedPages(std::size_t bytes);
  ~ZeroedPages();
  ZeroedPages(ZeroedPages&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr, o.bytes_ = 0;
  }
  ZeroedPages& operator=(ZeroedPages&& o) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A byte range of zeroed pages (for PagePrefaulter).
struct PageRange {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// Blocks of pages handed from one owner to another, so that memory already
// faulted in is used again instead of fresh pages: a wafer whose link
// records are all in the past gives its block back, the next wafer the
// pipeline reaches takes it as it is (FlowModel::use_record_pool; such
// records need no zeroing, see there). A block carries a tag from the owner
// that gave it back to the next (FlowModel: the end of the reservations its
// records hold). Not thread-safe: one simulation thread.
class PagePool {
 public:
  struct Block {
    ZeroedPages pages;
    std::uint64_t tag = 0;  // 0 for a block never used
  };
  // A block of `bytes`: one made by stock() first (zero bytes, tag 0), then
  // one given back (its bytes and tag as given), else a new zeroed mapping.
  Block take(std::size_t bytes);
  // Takes `pages` back, with its tag, for a later take().
  void give(ZeroedPages pages, std::uint64_t tag);
  // Makes `count` blocks of `bytes` ahead of need and returns their ranges
  // (for a PagePrefaulter to fault in while the simulation starts).
  std::vector<PageRange> stock(int count, std::size_t bytes);

  // Blocks mapped so far, and blocks handed out again after a give().
  std::uint64_t blocks_made() const { return made_; }
  std::uint64_t blocks_reused() const { return reused_; }

 private:
  std::vector<Block> fresh_;  // never used (stock()), handed out first
  std::vector<Block> used_;   // given back
  std::uint64_t made_ = 0, reused_ = 0;
};

// Faults in (and so has the kernel zero) the pages of `ranges`, in order, on
// a thread of its own, while the simulation runs on another: the first pass
// over a 26-wafer placement then finds most of its link records present
// instead of spending half its time in page faults. It writes nothing
// (madvise MADV_POPULATE_WRITE, Linux 5.14+, then a read of a byte of each
// page, which a virtual machine's host may map only then; without the
// madvise the thread ends at once), so results do not depend on how far it
// got. It takes the whole pages inside each range (a range need not be
// aligned). Pages the simulation would never have touched are faulted in
// too. The destructor stops it between two chunks and joins it; destroy it
// before the ranges are unmapped.
class PagePrefaulter {
 public:
  explicit PagePrefaulter(std::vector<PageRange> ranges);
  ~PagePrefaulter();
  PagePrefaulter(const PagePrefaulter&) = delete;
  PagePrefaulter& operator=(const PagePrefaulter&) = delete;

  // Bytes faulted in so far (for tests and benchmarks).
  std::size_t done_bytes() const { return done_.load(std::memory_order_relaxed); }
  // Waits until every range is done (or the kernel refused).
  void wait();

 private:
  void run();
  std::vector<PageRange> ranges_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> done_{0};
  std::thread thread_;
};

// n elements of T, each starting as T{}. T must be an implicit-lifetime
// type (an aggregate of plain members, trivially destructible) whose
// value-initialised state is all-zero bytes, so that the zeroed pages already
// hold n value-initialised elements; each user's unit test checks the latter
// (link_timing_test: LinkStateStartsAsZeroBytes).
template <class T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "ZeroedArray holds plain records only");
  static_assert(alignof(T) <= 4096, "pages are 4 KiB aligned");

 public:
  explicit ZeroedArray(std::size_t n) : pages_(n * sizeof(T)), n_(n) {}
  // n elements in `pages` (at least n * sizeof(T) bytes), as the pages hold
  // them: T{} for pages never written, else what their last owner left.
  ZeroedArray(ZeroedPages pages, std::size_t n) : pages_(std::move(pages)), n_(n) {}

  std::size_t size() const { return n_; }
  // Whether it holds pages (give_pages() leaves it without).
  bool held() const { return pages_.data() != nullptr; }
  // Hands its pages over and holds none after (size 0).
  ZeroedPages give_pages() {
    n_ = 0;
    return std::move(pages_);
  }
  PageRange pages() const { return {pages_.data(), pages_.bytes()}; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }

 private:
  T* data() const { return static_cast<T*>(pages_.data()); }

  ZeroedPages pages_;
  std::size_t n_ = 0;
};

}  // namespace wafersim::fabric
