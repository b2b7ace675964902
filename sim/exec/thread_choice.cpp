#include "sim/exec/thread_choice.hpp"

#include <algorithm>

namespace wafersim::sim {

bool ThreadChoice::compare(bool chosen) {
  double sum[2] = {0, 0};
  for (const auto& [shape, s] : spells_) {
    if (s.runs[0] == 0 || s.runs[1] == 0) continue;
    const auto n = static_cast<double>(s.runs[0] + s.runs[1]);
    for (int w = 0; w < 2; ++w) sum[w] += n * s.seconds[w] / static_cast<double>(s.runs[w]);
  }
  spells_.clear();
  ++comparisons_;
  const double kept = sum[chosen ? 1 : 0], other = sum[chosen ? 0 : 1];
  return other < (1 - kMargin) * kept ? !chosen : chosen;
}

void ThreadChoice::took(std::uint64_t shape, double seconds) {
  ++runs_[two_ ? 1 : 0];
  // Measured: a spell's works once settled, a stay's last kSpell.
  const bool measured = stage_ == Stage::stay ? left_ <= kSpell : since_ >= kSettle;
  if (measured) {
    Spells& s = spells_[shape];
    ++s.runs[two_ ? 1 : 0];
    s.seconds[two_ ? 1 : 0] += seconds;
  }
  ++since_;
  if (--left_ > 0) return;
  since_ = 0;
  switch (stage_) {
    case Stage::first_spell:
      stage_ = Stage::second_spell;
      two_ = false;
      left_ = kSpell;
      return;
    case Stage::second_spell:
      // One thread unless two are faster by kMargin: it leaves a core free.
      chosen_ = compare(false);
      break;
    case Stage::stay:
      stage_ = Stage::other_spell;
      two_ = !chosen_;
      left_ = kSpell;
      return;
    case Stage::other_spell: {
      const bool was = chosen_;
      chosen_ = compare(chosen_);
      if (chosen_ == was) {
        stay_ = std::min(2 * stay_, kLongestStay);
      } else {
        stay_ = kFirstStay;
        ++changes_;
      }
      break;
    }
  }
  stage_ = Stage::stay;
  two_ = chosen_;
  left_ = stay_;
}

}  // namespace wafersim::sim
