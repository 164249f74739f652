/* pt2pt network plugin for SimGrid/SMPI (>= 3.31): per-message network factors from the
 * kit's tables, per route class (intra-node / inter-node), with or without noise.
 *
 * Why a plugin: SimGrid's factor strings (smpi/lat-factor, network/latency-factor) are
 * deterministic and global (one curve for every route), while the model says small
 * messages are noisy and heavy-tailed, and a cluster has two models: messages between
 * ranks of one host (shared memory) and between hosts. SimGrid lets a program replace the
 * strings by callbacks (NetworkModelIntf::set_lat_factor_cb / set_bw_factor_cb), which see
 * the route's hosts; this library installs such callbacks as soon as the platform exists.
 *
 * How it is loaded: smpirun runs `smpimain`; the kit passes
 *   smpirun -wrapper "env LD_PRELOAD=libpt2pt_noise.so PT2PT_SIMGRID_NOISE=simgrid-noise.tsv" ...
 * so this library's constructor connects to Engine::on_platform_created before the
 * simulation starts. Nothing is done when PT2PT_SIMGRID_NOISE is unset.
 *
 * Table (written by `pt2pt export --simgrid` / kit.outputs.export.platform):
 *   lines starting with '#' are comments; then one line per (segment, table size):
 *   BOUND LAT_FACTOR BW_FACTOR SIZE N Q_1 ... Q_N
 *   The segment applies to sizes strictly above BOUND (SimGrid's lookup); Q_i are the
 *   quantiles at probabilities (i - 0.5) / N of the ratio network time / central time
 *   at message size SIZE. Several lines with the same BOUND give the noise at several
 *   sizes; a message between two table sizes interpolates both in log(size).
 *   = SIZE LAT_FACTOR BW_FACTOR N Q_1 ... Q_N
 *   a measured size's own factors and table: that transfer size alone (the factor
 *   strings carry it as a one-byte entry), looked up before the segments.
 *   class NAME
 *   the lines that follow belong to route class NAME (before any: class "all"). A message
 *   between two ranks of one host uses class "intra", between hosts "inter"; either falls
 *   back to "all" when the table has no such class.
 *   link NAME BANDWIDTH_BPS LATENCY_S
 *   set that link's nominal bandwidth and latency when the platform is created (per-link
 *   values a <cluster> tag cannot say); an unknown link name is an error.
 *   shaper RATE_BPS BURST_BYTES [LINE_BPS]
 *   a token bucket on every host's messages to other hosts (kit/outputs/export/shaper.py):
 *   the factors describe a message on an idle link (a full bucket, as the ping-pong that
 *   calibrated them saw); the bucket is replayed in simulated time per sending host as a
 *   fluid (bytes leave at LINE while it has tokens, which drain at LINE - RATE, at RATE
 *   after; LINE absent: at once), and a message that takes longer through it than on an idle
 *   link (messages sent just before it) waits the difference as extra latency. A message on
 *   an idle link keeps its factors.
 * Each message draws one u ~ U(0,1) and r = Q(u); it gets latency factor LAT*r and
 * bandwidth factor BW/r, so its whole network time is multiplied by r.
 * PT2PT_SIMGRID_SEED (default 1) seeds the generator; PT2PT_SIMGRID_DETERMINISTIC=1 keeps
 * r = 1 (every message at its table's centre: the model's median).
 */
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Table {
  double size;
  std::vector<double> q;
};

struct Segment {
  long bound;
  double lat;
  double bw;
  std::vector<Table> tables;  // sorted by size
};

struct RouteClass {
  std::vector<Segment> segments;           // sorted by bound
  std::unordered_map<long, Segment> exact;  // transfer size -> its own segment (one table)
};

struct LinkValue {
  std::string name;
  double bandwidth;
  double latency;
};

std::map<std::string, RouteClass> classes;
const RouteClass* intra_class = nullptr;
const RouteClass* inter_class = nullptr;
std::vector<LinkValue> link_values;

// The token bucket of a sending host: `tokens` bytes are available at time `t`, the time
// its queue (messages already admitted) is empty.
struct Bucket {
  double t;
  double tokens;
};
bool shaped = false;
double shaper_rate = 0.0;
double shaper_burst = 0.0;
double shaper_line = INFINITY;
std::unordered_map<const simgrid::s4u::Host*, Bucket> buckets;
double pending_wait = 0.0;  // the shaper's wait for the message whose factors are pending
std::mt19937_64 rng;
bool deterministic = false;
// The ratio drawn by the bandwidth callback, reused by the latency callback of the same
// message (SimGrid calls the bandwidth callback first, then the latency one).
double pending_ratio = 1.0;
bool pending = false;

std::runtime_error bad(const std::string& path, int lineno, const std::string& what) {
  return std::runtime_error("pt2pt noise plugin: " + path + ":" + std::to_string(lineno) + ": " + what);
}

void read_quantiles(std::istringstream& ls, Table& t, size_t n, const std::string& path, int lineno) {
  t.q.resize(n);
  for (auto& v : t.q)
    if (!(ls >> v) || !(v > 0))
      throw bad(path, lineno, "quantiles must be positive numbers");
  std::sort(t.q.begin(), t.q.end());
}

void load(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("pt2pt noise plugin: cannot open " + path);
  std::string line;
  int lineno = 0;
  std::string current = "all";
  std::map<std::string, std::map<long, size_t>> index;
  while (std::getline(in, line)) {
    lineno++;
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream ls(line);
    if (line.rfind("class ", 0) == 0) {
      std::string word;
      if (!(ls >> word >> current))
        throw bad(path, lineno, "expected class NAME");
      classes[current];
      continue;
    }
    if (line.rfind("link ", 0) == 0) {
      std::string word;
      LinkValue v;
      if (!(ls >> word >> v.name >> v.bandwidth >> v.latency) || !(v.bandwidth > 0) || !(v.latency >= 0))
        throw bad(path, lineno, "expected link NAME BANDWIDTH_BPS LATENCY_S");
      link_values.push_back(v);
      continue;
    }
    if (line.rfind("shaper ", 0) == 0) {
      std::string word;
      if (!(ls >> word >> shaper_rate >> shaper_burst) || !(shaper_rate > 0) || !(shaper_burst >= 0))
        throw bad(path, lineno, "expected shaper RATE_BPS BURST_BYTES [LINE_BPS] (rate > 0, burst >= 0)");
      double line;
      if (ls >> line) {
        if (!(line > 0))
          throw bad(path, lineno, "the shaper's LINE_BPS must be > 0");
        shaper_line = line;
      }
      shaped = true;
      continue;
    }
    RouteClass& rc = classes[current];
    if (line[0] == '=') {
      std::string mark;
      long size;
      Segment s{0, 0, 0, {Table{}}};
      size_t n;
      if (!(ls >> mark >> size >> s.lat >> s.bw >> n) || n == 0 || !(s.lat >= 0) || !(s.bw > 0))
        throw bad(path, lineno, "expected = SIZE LAT BW N Q1..QN");
      s.bound = size - 1;
      s.tables[0].size = static_cast<double>(size);
      read_quantiles(ls, s.tables[0], n, path, lineno);
      rc.exact[size] = std::move(s);
      continue;
    }
    long bound;
    double lat;
    double bw;
    Table t;
    size_t n;
    if (!(ls >> bound >> lat >> bw >> t.size >> n) || n == 0 || !(lat >= 0) || !(bw > 0))
      throw bad(path, lineno, "expected BOUND LAT BW SIZE N Q1..QN");
    read_quantiles(ls, t, n, path, lineno);
    auto& idx = index[current];
    auto it = idx.find(bound);
    if (it == idx.end()) {
      idx[bound] = rc.segments.size();
      rc.segments.push_back({bound, lat, bw, {}});
      it = idx.find(bound);
    }
    rc.segments[it->second].tables.push_back(std::move(t));
  }
  for (auto& [name, rc] : classes) {
    if (rc.segments.empty())
      throw std::runtime_error("pt2pt noise plugin: class " + name + " has no segment in " + path);
    std::sort(rc.segments.begin(), rc.segments.end(), [](const Segment& a, const Segment& b) { return a.bound < b.bound; });
    for (auto& s : rc.segments)
      std::sort(s.tables.begin(), s.tables.end(), [](const Table& a, const Table& b) { return a.size < b.size; });
  }
  if (classes.empty())
    throw std::runtime_error("pt2pt noise plugin: no segment in " + path);
  auto pick = [](const char* name) -> const RouteClass* {
    auto it = classes.find(name);
    if (it != classes.end())
      return &it->second;
    auto all = classes.find("all");
    if (all != classes.end())
      return &all->second;
    return nullptr;
  };
  intra_class = pick("intra");
  inter_class = pick("inter");
  if (!intra_class || !inter_class)
    throw std::runtime_error("pt2pt noise plugin: " + path + " needs class all, or both inter and intra");
}

/* A measured size's own segment, else SimGrid's lookup: the segment with the largest
 * bound strictly below the size. */
const Segment* find(const RouteClass& rc, double size) {
  if (!rc.exact.empty() && size == std::floor(size)) {
    auto it = rc.exact.find(static_cast<long>(size));
    if (it != rc.exact.end())
      return &it->second;
  }
  auto it = std::lower_bound(rc.segments.begin(), rc.segments.end(), size,
                             [](const Segment& s, double v) { return static_cast<double>(s.bound) < v; });
  return it == rc.segments.begin() ? nullptr : &*(it - 1);
}

const Segment* route_segment(double size, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) {
  return find(src == dst ? *intra_class : *inter_class, size);
}

double quantile(const Table& t, double u) {
  // Q_i sits at probability (i - 0.5) / n; clamp outside [0.5/n, 1 - 0.5/n].
  double n = static_cast<double>(t.q.size());
  double x = u * n - 0.5;
  if (x <= 0)
    return t.q.front();
  if (x >= n - 1)
    return t.q.back();
  auto i = static_cast<size_t>(x);
  double w = x - static_cast<double>(i);
  return t.q[i] * (1 - w) + t.q[i + 1] * w;
}

double draw(const Segment& s, double size) {
  if (deterministic)
    return 1.0;
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto& tb = s.tables;
  if (tb.size() == 1 || size <= tb.front().size)
    return quantile(tb.front(), u);
  if (size >= tb.back().size)
    return quantile(tb.back(), u);
  size_t j = 1;
  while (tb[j].size < size)
    j++;
  double w = (std::log(size) - std::log(tb[j - 1].size)) / (std::log(tb[j].size) - std::log(tb[j - 1].size));
  return quantile(tb[j - 1], u) * (1 - w) + quantile(tb[j], u) * w;
}

/* How long `size` bytes take through a bucket holding `tokens`; `left` gets its tokens after.
 * Fluid: at the line's speed while tokens last (they drain at line - rate), then at rate. */
double through(double size, double tokens, double* left) {
  if (std::isinf(shaper_line)) {  // bytes leave at once while tokens last
    *left = std::max(0.0, tokens - size);
    return size <= tokens ? 0.0 : (size - tokens) / shaper_rate;
  }
  double drain = shaper_line - shaper_rate;
  if (!(drain > 0)) {  // the line is no faster than the bucket: it never empties
    *left = std::min(shaper_burst, tokens - size * drain / shaper_line);
    return size / shaper_line;
  }
  double fast = tokens / drain * shaper_line;  // bytes that leave at the line's speed
  if (size <= fast) {
    *left = tokens - size * drain / shaper_line;
    return size / shaper_line;
  }
  *left = 0.0;
  return fast / shaper_line + (size - fast) / shaper_rate;
}

/* Admit a message of `size` bytes from `src` now; the extra time (s) it waits for the bucket
 * beyond what it would take on an idle link (a full bucket). */
double shaper_wait(double size, const simgrid::s4u::Host* src) {
  double now = simgrid::s4u::Engine::get_clock();
  auto it = buckets.find(src);
  if (it == buckets.end())
    it = buckets.emplace(src, Bucket{now, shaper_burst}).first;
  Bucket& b = it->second;
  double start = std::max(now, b.t);
  double tokens = std::min(shaper_burst, b.tokens + (start - b.t) * shaper_rate);
  double left;
  double finish = start + through(size, tokens, &left);
  b.t = finish;
  b.tokens = std::max(0.0, left);
  double unused;
  double idle = through(size, shaper_burst, &unused);
  return std::max(0.0, finish - now - idle);
}

double bw_factor(double size, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst,
                 const std::vector<simgrid::s4u::Link*>&, const std::unordered_set<simgrid::s4u::NetZone*>&) {
  pending_wait = (shaped && src != dst) ? shaper_wait(size, src) : 0.0;
  const Segment* s = route_segment(size, src, dst);
  if (!s) {
    pending = false;
    return 1.0;
  }
  pending_ratio = draw(*s, size);
  pending = true;
  return s->bw / pending_ratio;
}

double lat_factor(double size, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst,
                  const std::vector<simgrid::s4u::Link*>& links, const std::unordered_set<simgrid::s4u::NetZone*>&) {
  double wait = pending_wait;
  pending_wait = 0.0;
  // SimGrid multiplies the route's latency by this factor: the shaper's wait is added as a
  // share of it (a route without latency cannot carry a wait).
  double route_latency = 0.0;
  for (auto const* link : links)
    route_latency += link->get_latency();
  double extra = (wait > 0 && route_latency > 0) ? wait / route_latency : 0.0;
  const Segment* s = route_segment(size, src, dst);
  if (!s)
    return 1.0 + extra;
  double r = pending ? pending_ratio : draw(*s, size);
  pending = false;
  return s->lat * r + extra;
}

void install() {
  const char* path = std::getenv("PT2PT_SIMGRID_NOISE");
  if (!path || !*path)
    return;
  const char* seed = std::getenv("PT2PT_SIMGRID_SEED");
  rng.seed(seed ? std::strtoull(seed, nullptr, 10) : 1ULL);
  const char* det = std::getenv("PT2PT_SIMGRID_DETERMINISTIC");
  deterministic = det && *det && std::string(det) != "0";
  load(path);
  for (auto const& v : link_values) {
    auto* link = simgrid::s4u::Link::by_name_or_null(v.name);
    if (!link)
      throw std::runtime_error(std::string("pt2pt noise plugin: ") + path + ": link " + v.name +
                               " is not in the platform");
    link->set_bandwidth(v.bandwidth);
    link->set_latency(v.latency);
  }
  auto* model = simgrid::s4u::Engine::get_instance()->get_netzone_root()->get_network_model();
  model->set_bw_factor_cb(bw_factor);
  model->set_lat_factor_cb(lat_factor);
}

struct Register {
  Register() { simgrid::s4u::Engine::on_platform_created_cb(install); }
} registration;

}  // namespace
