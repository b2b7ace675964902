#include "fabric/wavelet.hpp"

#include <algorithm>
#include <queue>
#include <stdexcept>

namespace wafersim::fabric {

namespace {

constexpr int kPorts = 5;  // E, W, S, N (the Direction values) and the core ramp
constexpr int kRamp = 4;

struct Wavelet {
  std::uint32_t message = 0;
  std::uint32_t seq = 0;  // index within its message
};

// One run of the cycle-level model. All per-router state is in flat arrays:
// input FIFOs indexed by (router, input port, color), outputs by (router,
// output port, color).
class WaveletRun {
 public:
  WaveletRun(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic,
             const WaveletConfig& config, WaveletStats& stats);
  TrafficResult run();

 private:
  std::size_t fifo(std::size_t router, int port, int color) const {
    return (router * kPorts + static_cast<std::size_t>(port)) * colors_ +
           static_cast<std::size_t>(color);
  }
  std::size_t credit_index(std::size_t router, int port, int color) const {
    return (router * kDirections + static_cast<std::size_t>(port)) * colors_ +
           static_cast<std::size_t>(color);
  }
  std::uint8_t route(std::size_t router, std::uint32_t message) const;
  void activate(std::uint32_t m);
  void activate_due();
  void inject();
  void switch_router(std::size_t n);
  void send(std::size_t n, int out, int color, Wavelet w);
  void eject(std::size_t n, Wavelet w);
  void push_fifo(std::size_t q, Wavelet w);
  std::uint64_t next_event() const;

  const Mesh& mesh_;
  const Traffic& traffic_;
  const WaveletConfig& config_;
  WaveletStats& stats_;
  TrafficResult result_;
  detail::ReadyTracker tracker_;

  const std::size_t routers_;
  const std::size_t colors_;
  const int depth_;
  const std::uint64_t hop_latency_;
  const std::int64_t offset_[kDirections];
  std::uint64_t now_ = 0;

  // Input FIFOs.
  std::vector<Wavelet> fifo_;
  std::vector<std::uint8_t> fifo_head_, fifo_count_;
  std::vector<std::uint8_t> route_;  // output mask of the packet at the front (0: not yet routed)
  std::vector<std::uint16_t> router_wavelets_;
  std::vector<std::uint16_t> rr_;  // round-robin start per router
  std::uint64_t in_network_ = 0;   // wavelets in FIFOs or on links
  // Outputs.
  std::vector<std::int8_t> owner_;    // input port whose packet holds the output (-1: free)
  std::vector<std::uint8_t> credit_;  // free slots downstream, per (router, direction, color)
  std::vector<std::uint32_t> credit_return_;  // credits freed this cycle, usable next cycle
  std::vector<std::uint64_t> link_last_use_;  // cycle + 1 of the last traversal
  // Wavelets on links, by the cycle they land: slot (cycle % (hop_latency + 1)).
  struct Landing {
    std::uint32_t fifo;
    Wavelet w;
  };
  std::vector<std::vector<Landing>> landing_;

  // Messages.
  std::vector<std::uint32_t> wavelets_;    // per message
  std::vector<std::uint32_t> injected_;    // wavelets put on the ramp so far
  std::vector<std::uint32_t> queue_next_;  // per-core, per-color FIFO of messages
  std::vector<std::uint32_t> queue_head_, queue_tail_;
  std::vector<std::uint32_t> core_queued_;  // messages queued per core
  std::vector<std::uint32_t> active_cores_;
  std::vector<std::uint16_t> core_rr_;
  std::vector<std::uint32_t> stream_to_;      // the message this one's wavelets release
  std::vector<std::uint32_t> release_first_;  // into release_, for streamed messages
  std::vector<std::uint64_t> release_;        // per wavelet of a streamed message
  std::vector<std::uint32_t> initial_;        // ready from the start, by (ready, index)
  std::size_t initial_next_ = 0;
  using Entry = std::pair<std::uint64_t, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> later_;
  std::vector<std::uint32_t> now_ready_;
  std::uint64_t undelivered_ = 0;
  bool injected_this_cycle_ = false;
};

WaveletRun::WaveletRun(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic,
                       const WaveletConfig& config, WaveletStats& stats)
    : mesh_(mesh),
      traffic_(traffic),
      config_(config),
      stats_(stats),
      tracker_(traffic, result_, /*stream_blocks=*/false, spec.link_bytes_per_cycle),
      routers_(mesh.core_count()),
      colors_(static_cast<std::size_t>(traffic.colors())),
      depth_(config.buffer_depth),
      hop_latency_(spec.hop_latency.value),
      offset_{1, -1, mesh.width(), -mesh.width()} {
  if (depth_ < 1 || depth_ > 255) throw std::invalid_argument("wavelet buffer depth must be 1-255");
  if (hop_latency_ < 1) throw std::invalid_argument("hop latency must be at least 1 cycle");
  const std::size_t fifos = routers_ * kPorts * colors_;
  fifo_.resize(fifos * static_cast<std::size_t>(depth_));
  fifo_head_.assign(fifos, 0);
  fifo_count_.assign(fifos, 0);
  route_.assign(fifos, 0);
  owner_.assign(fifos, -1);
  credit_.assign(routers_ * kDirections * colors_, static_cast<std::uint8_t>(depth_));
  router_wavelets_.assign(routers_, 0);
  rr_.assign(routers_, 0);
  link_last_use_.assign(mesh.link_count(), 0);
  landing_.resize(hop_latency_ + 1);

  const auto& ms = traffic.messages();
  const std::size_t n_msgs = ms.size();
  wavelets_.resize(n_msgs);
  injected_.assign(n_msgs, 0);
  queue_next_.assign(n_msgs, kNoMessage);
  queue_head_.assign(routers_ * colors_, kNoMessage);
  queue_tail_.assign(routers_ * colors_, kNoMessage);
  core_queued_.assign(routers_, 0);
  core_rr_.assign(routers_, 0);
  stream_to_.assign(n_msgs, kNoMessage);
  release_first_.assign(n_msgs, 0);
  const std::uint64_t bytes_per_wavelet = spec.link_bytes_per_cycle.value;
  for (std::uint32_t i = 0; i < n_msgs; ++i) {
    const Message& m = ms[i];
    wavelets_[i] = static_cast<std::uint32_t>(ceil_div(m.bytes.value, bytes_per_wavelet));
    if (!(m.src == m.dst)) undelivered_ += Traffic::receivers(m);
    if (m.stream_from != kNoMessage) {
      stream_to_[m.stream_from] = i;
      release_first_[i] = static_cast<std::uint32_t>(release_.size());
      release_.resize(release_.size() + wavelets_[i], kNever);
    }
  }
  initial_ = tracker_.initially_ready();
  std::stable_sort(initial_.begin(), initial_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return result_.ready[a] < result_.ready[b];
  });
  stats_ = WaveletStats{};
  stats_.link_wavelets.assign(mesh.link_count(), 0);
}

std::uint8_t WaveletRun::route(std::size_t router, std::uint32_t message) const {
  const Message& m = traffic_.messages()[message];
  const Coord c = mesh_.coord(CoreId{static_cast<std::uint32_t>(router)});
  auto bit = [](int port) { return static_cast<std::uint8_t>(1u << port); };
  if (m.multicast) {
    const Direction d = Traffic::heading(m);
    const Direction back = opposite(d);
    if (c == m.src)
      return static_cast<std::uint8_t>(bit(static_cast<int>(d)) |
                                       (m.back_hops > 0 ? bit(static_cast<int>(back)) : 0));
    if (Traffic::receiver_at(m, c) >= static_cast<std::uint32_t>(manhattan(m.src, m.dst))) {
      // Behind the source (a multicast both ways): on to the far end.
      if (static_cast<std::uint32_t>(manhattan(m.src, c)) == m.back_hops) return bit(kRamp);
      return bit(kRamp) | bit(static_cast<int>(back));
    }
    if (c == m.dst) return bit(kRamp);
    return bit(kRamp) | bit(static_cast<int>(d));
  }
  if (c == m.dst) return bit(kRamp);
  if (c.x != m.dst.x)
    return bit(static_cast<int>(m.dst.x > c.x ? Direction::east : Direction::west));
  return bit(static_cast<int>(m.dst.y > c.y ? Direction::south : Direction::north));
}

void WaveletRun::activate(std::uint32_t m) {
  const Message& msg = traffic_.messages()[m];
  if (msg.src == msg.dst) {
    // Nothing travels: the message is at its destination when ready.
    now_ready_.clear();
    tracker_.arrive({m, 0}, result_.ready[m], now_ready_);
    for (std::uint32_t d : now_ready_) later_.push({result_.ready[d], d});
    return;
  }
  const std::size_t n = mesh_.id(msg.src).value;
  const std::size_t q = n * colors_ + msg.color;
  if (queue_tail_[q] == kNoMessage)
    queue_head_[q] = m;
  else
    queue_next_[queue_tail_[q]] = m;
  queue_tail_[q] = m;
  if (core_queued_[n]++ == 0) active_cores_.push_back(static_cast<std::uint32_t>(n));
}

void WaveletRun::activate_due() {
  const auto& ms_ready = result_.ready;
  for (;;) {
    const bool from_initial =
        initial_next_ < initial_.size() && ms_ready[initial_[initial_next_]] <= now_;
    if (from_initial) {
      activate(initial_[initial_next_++]);
      continue;
    }
    if (!later_.empty() && later_.top().first <= now_) {
      const std::uint32_t m = later_.top().second;
      later_.pop();
      activate(m);
      continue;
    }
    break;
  }
}

void WaveletRun::inject() {
  // Each core puts at most one wavelet per cycle on its ramp, round-robin over
  // its colors.
  std::size_t keep = 0;
  for (std::size_t k = 0; k < active_cores_.size(); ++k) {
    const std::uint32_t n = active_cores_[k];
    const std::size_t start = core_rr_[n];
    for (std::size_t i = 0; i < colors_; ++i) {
      const std::size_t v = (start + i) % colors_;
      const std::uint32_t m = queue_head_[n * colors_ + v];
      if (m == kNoMessage) continue;
      const std::uint32_t seq = injected_[m];
      if (traffic_.messages()[m].stream_from != kNoMessage &&
          release_[release_first_[m] + seq] > now_)
        continue;
      const std::size_t q = fifo(n, kRamp, static_cast<int>(v));
      if (fifo_count_[q] >= depth_) continue;
      push_fifo(q, Wavelet{m, seq});
      ++in_network_;
      ++stats_.wavelets_injected;
      injected_this_cycle_ = true;
      if (++injected_[m] == wavelets_[m]) {
        const std::size_t qi = n * colors_ + v;
        queue_head_[qi] = queue_next_[m];
        if (queue_head_[qi] == kNoMessage) queue_tail_[qi] = kNoMessage;
        --core_queued_[n];
      }
      core_rr_[n] = static_cast<std::uint16_t>((v + 1) % colors_);
      break;
    }
    if (core_queued_[n] > 0) active_cores_[keep++] = n;
  }
  active_cores_.resize(keep);
}

void WaveletRun::push_fifo(std::size_t q, Wavelet w) {
  if (fifo_count_[q] >= depth_) {
    ++stats_.buffer_overflow;
    return;
  }
  std::size_t slot = fifo_head_[q] + fifo_count_[q];
  if (slot >= static_cast<std::size_t>(depth_)) slot -= static_cast<std::size_t>(depth_);
  fifo_[q * static_cast<std::size_t>(depth_) + slot] = w;
  ++fifo_count_[q];
  stats_.max_buffer_occupancy = std::max<int>(stats_.max_buffer_occupancy, fifo_count_[q]);
  ++router_wavelets_[q / (kPorts * colors_)];
}

void WaveletRun::send(std::size_t n, int out, int color, Wavelet w) {
  const auto down = static_cast<std::size_t>(static_cast<std::int64_t>(n) + offset_[out]);
  landing_[(now_ + hop_latency_) % landing_.size()].push_back(
      Landing{static_cast<std::uint32_t>(fifo(down, out, color)), w});
  --credit_[credit_index(n, out, color)];
  const Coord c = mesh_.coord(CoreId{static_cast<std::uint32_t>(n)});
  const std::uint32_t link = mesh_.link(c, static_cast<Direction>(out)).value;
  if (link_last_use_[link] == now_ + 1) ++stats_.link_overuse;
  link_last_use_[link] = now_ + 1;
  ++stats_.link_wavelets[link];
  ++stats_.link_traversals;
}

void WaveletRun::eject(std::size_t n, Wavelet w) {
  ++stats_.wavelets_ejected;
  ++stats_.ejected_per_cycle[now_];
  const std::uint32_t m = w.message;
  const std::uint32_t down = stream_to_[m];
  if (down != kNoMessage)
    release_[release_first_[down] + w.seq] = now_ + traffic_.messages()[down].stream_delay.value;
  if (w.seq + 1 == wavelets_[m]) {
    const Message& msg = traffic_.messages()[m];
    const Coord c = mesh_.coord(CoreId{static_cast<std::uint32_t>(n)});
    const std::uint32_t receiver = msg.multicast ? Traffic::receiver_at(msg, c) : 0u;
    now_ready_.clear();
    tracker_.arrive({m, receiver}, now_ + 1, now_ready_);
    for (std::uint32_t d : now_ready_) later_.push({result_.ready[d], d});
    --undelivered_;
  }
}

void WaveletRun::switch_router(std::size_t n) {
  const std::size_t candidates = kPorts * colors_;
  const std::size_t start = rr_[n];
  unsigned used_in = 0, used_out = 0;
  std::size_t next_start = start + 1 == candidates ? 0 : start + 1;
  bool granted_any = false;
  for (std::size_t k = 0; k < candidates; ++k) {
    std::size_t c = start + k;
    if (c >= candidates) c -= candidates;
    const int p = static_cast<int>(c / colors_);
    const int v = static_cast<int>(c % colors_);
    if (used_in & (1u << p)) continue;
    const std::size_t q = fifo(n, p, v);
    if (fifo_count_[q] == 0) continue;
    const Wavelet w = fifo_[q * static_cast<std::size_t>(depth_) + fifo_head_[q]];
    if (route_[q] == 0) route_[q] = route(n, w.message);
    const unsigned mask = route_[q];
    if (mask & used_out) continue;
    bool ok = true;
    for (int o = 0; o < kPorts && ok; ++o) {
      if (!(mask & (1u << o))) continue;
      const std::int8_t owner = owner_[fifo(n, o, v)];
      if (owner != -1 && owner != p) ok = false;
      if (o != kRamp && credit_[credit_index(n, o, v)] == 0) ok = false;
    }
    if (!ok) continue;
    // Granted: the wavelet leaves its FIFO for every output of its route.
    if (++fifo_head_[q] == depth_) fifo_head_[q] = 0;
    --fifo_count_[q];
    --router_wavelets_[n];
    --in_network_;
    const bool tail = w.seq + 1 == wavelets_[w.message];
    for (int o = 0; o < kPorts; ++o) {
      if (!(mask & (1u << o))) continue;
      owner_[fifo(n, o, v)] = tail ? std::int8_t{-1} : static_cast<std::int8_t>(p);
      if (o == kRamp) {
        eject(n, w);
      } else {
        ++in_network_;
        send(n, o, v, w);
      }
    }
    if (tail) route_[q] = 0;
    if (p != kRamp) {
      const auto up = static_cast<std::size_t>(static_cast<std::int64_t>(n) - offset_[p]);
      credit_return_.push_back(static_cast<std::uint32_t>(credit_index(up, p, v)));
    }
    if (!granted_any) {
      // Round robin: the first winner goes to the back of the order.
      next_start = c + 1 == candidates ? 0 : c + 1;
      granted_any = true;
    }
    used_in |= 1u << p;
    used_out |= mask;
    if (used_out == (1u << kPorts) - 1) break;
  }
  rr_[n] = static_cast<std::uint16_t>(next_start);
}

std::uint64_t WaveletRun::next_event() const {
  // Only called when the network is empty: the next cycle a message becomes
  // ready or a streamed wavelet is released.
  std::uint64_t t = kNever;
  if (initial_next_ < initial_.size()) t = std::min(t, result_.ready[initial_[initial_next_]]);
  if (!later_.empty()) t = std::min(t, later_.top().first);
  for (std::uint32_t n : active_cores_)
    for (std::size_t v = 0; v < colors_; ++v) {
      const std::uint32_t m = queue_head_[n * colors_ + v];
      if (m == kNoMessage) continue;
      if (traffic_.messages()[m].stream_from != kNoMessage)
        t = std::min(t, release_[release_first_[m] + injected_[m]]);
      else
        t = std::min(t, now_);
    }
  return t;
}

TrafficResult WaveletRun::run() {
  while (undelivered_ > 0 || initial_next_ < initial_.size() || !later_.empty()) {
    if (now_ >= config_.max_cycles) break;
    stats_.ejected_per_cycle.resize(now_ + 1, 0);
    // Wavelets landing from links, then credits returned last cycle.
    auto& landing = landing_[now_ % landing_.size()];
    for (const Landing& l : landing) push_fifo(l.fifo, l.w);
    landing.clear();
    for (std::uint32_t c : credit_return_) ++credit_[c];
    credit_return_.clear();

    activate_due();
    injected_this_cycle_ = false;
    if (!active_cores_.empty()) inject();
    if (in_network_ > 0)
      for (std::size_t n = 0; n < routers_; ++n)
        if (router_wavelets_[n] > 0) switch_router(n);
    ++now_;
    if (in_network_ == 0 && !injected_this_cycle_) {
      const std::uint64_t next = next_event();
      if (next == kNever) break;  // nothing can move again
      if (next > now_) now_ = std::min(next, config_.max_cycles);
    }
  }
  stats_.cycles = now_;
  stats_.router_cycles = now_ * routers_;
  stats_.ejected_per_cycle.resize(now_, 0);
  stats_.complete = undelivered_ == 0;
  return std::move(result_);
}

}  // namespace

TrafficResult run_wavelet(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic,
                          const WaveletConfig& config, WaveletStats* stats) {
  validate_traffic(mesh, spec, traffic);
  WaveletStats local;
  WaveletRun run(mesh, spec, traffic, config, stats ? *stats : local);
  return run.run();
}

}  // namespace wafersim::fabric
