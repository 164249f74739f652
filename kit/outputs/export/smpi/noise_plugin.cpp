/* pt2pt noise plugin for SimGrid/SMPI (>= 3.31): per-message network factors drawn from the
 * per-regime noise of a pt2pt model.
 *
 * Why a plugin: SimGrid's factor strings (smpi/lat-factor, network/latency-factor) are
 * deterministic, so a simulation built from them has no spread at all, while the model
 * says small messages are noisy and heavy-tailed. SimGrid lets a program replace the
 * strings by callbacks (NetworkModelIntf::set_lat_factor_cb / set_bw_factor_cb); this
 * library installs such callbacks as soon as the platform exists.
 *
 * How it is loaded: smpirun runs `smpimain`; the kit passes
 *   smpirun -wrapper "env LD_PRELOAD=libpt2pt_noise.so PT2PT_SIMGRID_NOISE=simgrid-noise.tsv" ...
 * so this library's constructor connects to Engine::on_platform_created before the
 * simulation starts. Nothing is done when PT2PT_SIMGRID_NOISE is unset.
 *
 * Table (written by `pt2pt export --simgrid`, the flat twin of simgrid-noise.json):
 *   lines starting with '#' are comments; then one line per (segment, table size):
 *   BOUND LAT_FACTOR BW_FACTOR SIZE N Q_1 ... Q_N
 *   The segment applies to sizes strictly above BOUND (SimGrid's lookup); Q_i are the
 *   quantiles at probabilities (i - 0.5) / N of the ratio network time / central time
 *   at message size SIZE. Several lines with the same BOUND give the noise at several
 *   sizes; a message between two table sizes interpolates both in log(size).
 *   = SIZE LAT_FACTOR BW_FACTOR N Q_1 ... Q_N
 *   a measured size's own factors and table: that transfer size alone (the factor
 *   strings carry it as a one-byte entry), looked up before the segments.
 * Each message draws one u ~ U(0,1) and r = Q(u); it gets latency factor LAT*r and
 * bandwidth factor BW/r, so its whole network time is multiplied by r.
 * PT2PT_SIMGRID_SEED (default 1) seeds the generator.
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

std::vector<Segment> segments;
std::unordered_map<long, Segment> exact;  // transfer size -> its own segment (one table)
std::mt19937_64 rng;
// The ratio drawn by the bandwidth callback, reused by the latency callback of the same
// message (SimGrid calls the bandwidth callback first, then the latency one).
double pending_ratio = 1.0;
bool pending = false;

void load(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("pt2pt noise plugin: cannot open " + path);
  std::string line;
  int lineno = 0;
  std::map<long, size_t> index;
  while (std::getline(in, line)) {
    lineno++;
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream ls(line);
    if (line[0] == '=') {
      std::string mark;
      long size;
      Segment s{0, 0, 0, {Table{}}};
      size_t n;
      if (!(ls >> mark >> size >> s.lat >> s.bw >> n) || n == 0 || !(s.lat >= 0) || !(s.bw > 0))
        throw std::runtime_error(path + ":" + std::to_string(lineno) + ": expected = SIZE LAT BW N Q1..QN");
      s.bound = size - 1;
      s.tables[0].size = static_cast<double>(size);
      s.tables[0].q.resize(n);
      for (auto& v : s.tables[0].q)
        if (!(ls >> v) || !(v > 0))
          throw std::runtime_error(path + ":" + std::to_string(lineno) + ": quantiles must be positive numbers");
      std::sort(s.tables[0].q.begin(), s.tables[0].q.end());
      exact[size] = std::move(s);
      continue;
    }
    long bound;
    double lat;
    double bw;
    Table t;
    size_t n;
    if (!(ls >> bound >> lat >> bw >> t.size >> n) || n == 0 || !(lat >= 0) || !(bw > 0))
      throw std::runtime_error(path + ":" + std::to_string(lineno) + ": expected BOUND LAT BW SIZE N Q1..QN");
    t.q.resize(n);
    for (auto& v : t.q)
      if (!(ls >> v) || !(v > 0))
        throw std::runtime_error(path + ":" + std::to_string(lineno) + ": quantiles must be positive numbers");
    std::sort(t.q.begin(), t.q.end());
    auto it = index.find(bound);
    if (it == index.end()) {
      index[bound] = segments.size();
      segments.push_back({bound, lat, bw, {}});
      it = index.find(bound);
    }
    segments[it->second].tables.push_back(std::move(t));
  }
  if (segments.empty())
    throw std::runtime_error("pt2pt noise plugin: no segment in " + path);
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.bound < b.bound; });
  for (auto& s : segments)
    std::sort(s.tables.begin(), s.tables.end(), [](const Table& a, const Table& b) { return a.size < b.size; });
}

/* A measured size's own segment, else SimGrid's lookup: the segment with the largest
 * bound strictly below the size. */
const Segment* find(double size) {
  if (!exact.empty() && size == std::floor(size)) {
    auto it = exact.find(static_cast<long>(size));
    if (it != exact.end())
      return &it->second;
  }
  auto it = std::lower_bound(segments.begin(), segments.end(), size,
                             [](const Segment& s, double v) { return static_cast<double>(s.bound) < v; });
  return it == segments.begin() ? nullptr : &*(it - 1);
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

double bw_factor(double size, const simgrid::s4u::Host*, const simgrid::s4u::Host*,
                 const std::vector<simgrid::s4u::Link*>&, const std::unordered_set<simgrid::s4u::NetZone*>&) {
  const Segment* s = find(size);
  if (!s) {
    pending = false;
    return 1.0;
  }
  pending_ratio = draw(*s, size);
  pending = true;
  return s->bw / pending_ratio;
}

double lat_factor(double size, const simgrid::s4u::Host*, const simgrid::s4u::Host*,
                  const std::vector<simgrid::s4u::Link*>&, const std::unordered_set<simgrid::s4u::NetZone*>&) {
  const Segment* s = find(size);
  if (!s)
    return 1.0;
  double r = pending ? pending_ratio : draw(*s, size);
  pending = false;
  return s->lat * r;
}

void install() {
  const char* path = std::getenv("PT2PT_SIMGRID_NOISE");
  if (!path || !*path)
    return;
  const char* seed = std::getenv("PT2PT_SIMGRID_SEED");
  rng.seed(seed ? std::strtoull(seed, nullptr, 10) : 1ULL);
  load(path);
  auto* model = simgrid::s4u::Engine::get_instance()->get_netzone_root()->get_network_model();
  model->set_bw_factor_cb(bw_factor);
  model->set_lat_factor_cb(lat_factor);
}

struct Register {
  Register() { simgrid::s4u::Engine::on_platform_created_cb(install); }
} registration;

}  // namespace
