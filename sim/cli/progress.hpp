// What a progress report says and when: a terminal gets a bar redrawn in
// place, a log file or pipe plain lines, throttled so that a long run leaves
// a line every ten seconds or so and a short one none. Header-only and free of
// I/O (the caller prints), so that tests can drive it with their own clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace wafersim::sim {

// "8 s", "3 min 05 s", "1 h 02 min".
inline std::string format_wall_time(double seconds) {
  if (!(seconds >= 0.0)) seconds = 0.0;
  const long long s = std::llround(seconds);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
}

// For a log (not a terminal): a line when `interval_s` has passed since the
// last one, or at a new 10% step (but not within `step_gap_s` of the last
// line); nothing during the first `quiet_s` (a short task stays silent), and
// a last line at the end when earlier lines were printed or the task took
// `interval_s` or more (a long phase without steps still leaves its time).
struct ProgressThrottle {
  double interval_s = 10.0;
  double step_gap_s = 1.0;
  double quiet_s = 2.0;
};

class ProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;
  ProgressReporter(std::string what, std::string unit, bool terminal,
                   ProgressThrottle throttle = ProgressThrottle())
      : what_(std::move(what)), unit_(std::move(unit)), terminal_(terminal), throttle_(throttle) {}

  // The text to show for DONE of TOTAL at `now`, or nothing. On a terminal
  // it is the bar (to be drawn over the previous one); otherwise one line.
  // `shown`, when not empty, is printed in place of "DONE/TOTAL UNIT" (the
  // fraction, the bar and the estimate still from DONE and TOTAL: a count
  // in coarse units shown, a finer one measured).
  std::optional<std::string> update(long long done, long long total, Clock::time_point now,
                                    std::string_view shown = {}) {
    if (total <= 0) return std::nullopt;
    if (!started_ || done < last_done_) {  // the first call, or the task began again
      started_ = true;
      start_ = now;
      last_line_ = now;
      last_step_ = 0;
      printed_ = false;
      last_bar_.clear();
    }
    last_done_ = done;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (terminal_) {
      // Called often (after every stage pass of a run): redrawn only when
      // the bar's text changes (its seconds at most once a second).
      std::string text = bar(done, total, elapsed, shown);
      if (text == last_bar_ && done < total) return std::nullopt;
      last_bar_ = text;
      return text;
    }
    const long long step = done * 10 / total;
    const double since = std::chrono::duration<double>(now - last_line_).count();
    bool show = false;
    if (done >= total)
      show = printed_ || elapsed >= throttle_.interval_s;  // a long task says it ended
    else if (elapsed >= throttle_.quiet_s)
      show = since >= throttle_.interval_s ||
             (step > last_step_ && (since >= throttle_.step_gap_s || !printed_));
    if (!show) return std::nullopt;
    last_step_ = step;
    last_line_ = now;
    printed_ = true;
    return line(done, total, elapsed, shown);
  }

 private:
  std::string counts(long long done, long long total, std::string_view shown) const {
    if (!shown.empty()) return std::string(shown);
    return fmt::format("{}/{}{}", done, total, unit_.empty() ? "" : " " + unit_);
  }
  static std::string eta(long long done, long long total, double elapsed) {
    if (done <= 0 || done >= total) return "";
    return ", about " + format_wall_time(elapsed * static_cast<double>(total - done) /
                                        static_cast<double>(done)) +
           " left";
  }
  std::string bar(long long done, long long total, double elapsed, std::string_view shown) const {
    const int width = 30;
    const int filled = static_cast<int>(std::min(done, total) * width / total);
    return fmt::format(
        "  {} [{}{}] {}, {}{}", what_, std::string(static_cast<std::size_t>(filled), '#'),
        std::string(static_cast<std::size_t>(width - filled), '.'), counts(done, total, shown),
        format_wall_time(elapsed), eta(done, total, elapsed));
  }
  std::string line(long long done, long long total, double elapsed, std::string_view shown) const {
    return fmt::format("wafersim: {}: {} ({}%), {} elapsed{}", what_, counts(done, total, shown),
                       done * 100 / total, format_wall_time(elapsed), eta(done, total, elapsed));
  }

  std::string what_, unit_;
  bool terminal_;
  ProgressThrottle throttle_;
  bool started_ = false, printed_ = false;
  Clock::time_point start_{}, last_line_{};
  long long last_done_ = 0, last_step_ = 0;
  std::string last_bar_;
};

}  // namespace wafersim::sim
