// Whether the timing work that can be split between two host threads is,
// chosen by the host time each way (Executor::set_timing_helper).
//
// Splitting a GEMV's bands between two threads pays where the records it
// sweeps are too many for one core's caches (a whole-wafer region: both
// threads wait on memory at once) and costs where part of them would stay
// in one core's caches from one GEMV to the next (a region of an eighth of
// the wafer: a record the other thread touched comes back from memory, on a
// host whose cores share no cache that holds it). Where that line falls
// depends on the host, so it is measured, not set.
//
// The choice is one for all work, taken in spells, compared as paired
// runs are: kSpell works on two threads, kSpell on one, then the faster way
// for a stay; its last kSpell works are measured, then kSpell the other way
// beside them, and the faster way stays on. Works alternated one at a time
// would be no measure: a work on one thread after another on two pays for
// the records the other core holds, which a run on one thread never does
// (so a spell's first kSettle works are left out). The spells' works differ
// (a GEMV, an attention block; small and large regions), so each shape of
// work keeps its mean time in each spell, and the two ways are compared by
// the sum over shapes met in both of the shape's mean, weighted by how
// often it ran in both. The first stay is kFirstStay works, and each stay
// twice the last while the choice holds (up to kLongestStay), so a run
// that keeps its choice spends a falling share of its works the other way.
// The other way is taken only if faster by more than kMargin.
//
// Host time only: both ways give the same results byte for byte (the
// helper's work is exact), so the choice never moves a figure.
#pragma once

#include <chrono>
#include <cstdint>
#include <unordered_map>

namespace wafersim::sim {

class ThreadChoice {
 public:
  static constexpr std::uint64_t kSpell = 128;
  static constexpr std::uint64_t kSettle = 8;
  static constexpr std::uint64_t kFirstStay = 256;
  static constexpr std::uint64_t kLongestStay = 65536;
  static constexpr double kMargin = 0.05;

  // Whether the next work runs on two threads (its shape is given to
  // took()).
  bool two_threads() const { return two_; }
  // A work of `shape` took `seconds` of host time, the way two_threads()
  // said.
  void took(std::uint64_t shape, double seconds);

  // Works run on two threads and on one, so far.
  std::uint64_t runs(bool two) const { return runs_[two ? 1 : 0]; }
  // Times the ways were compared, and how often a choice made changed.
  int comparisons() const { return comparisons_; }
  int changes() const { return changes_; }

  // Times one work from construction to destruction into `choice`.
  class Timer {
   public:
    Timer(ThreadChoice& choice, std::uint64_t shape)
        : choice_(choice), shape_(shape), t0_(std::chrono::steady_clock::now()) {}
    ~Timer() {
      choice_.took(shape_,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    ThreadChoice& choice_;
    std::uint64_t shape_;
    std::chrono::steady_clock::time_point t0_;
  };

 private:
  // A shape's works in the two spells being compared: [0] one thread, [1] two.
  struct Spells {
    std::uint64_t runs[2] = {0, 0};
    double seconds[2] = {0, 0};
  };
  // Compares the spells' ways: whether two threads were faster by the
  // weighted sum above (ties and shapes in one spell only: no evidence).
  // `chosen`: the way that stays unless the other beats it by kMargin.
  bool compare(bool chosen);

  enum class Stage { first_spell, second_spell, stay, other_spell };
  Stage stage_ = Stage::first_spell;
  std::unordered_map<std::uint64_t, Spells> spells_;
  bool two_ = true;              // the way of the works now
  bool chosen_ = true;           // the way of the stays
  std::uint64_t left_ = kSpell;  // works left in this spell or stay
  std::uint64_t since_ = 0;      // works since it began
  std::uint64_t stay_ = kFirstStay;
  std::uint64_t runs_[2] = {0, 0};
  int comparisons_ = 0, changes_ = 0;
};

}  // namespace wafersim::sim
