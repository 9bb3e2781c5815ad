#include "selector/estimate/projection.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>

namespace seqpoint::selector {

double TQuantile95(double dof) {
  // Exact, for fractional degrees of freedom too (the jackknife's are min(model, groups - 1)).
  // Below 1 (no real estimate of the noise) the dof-1 quantile would still be a guess: the
  // distribution at half a degree is far wider, and that is what such an interval should say.
  if (!(dof > 0)) dof = 0.5;
  if (dof > 1e7) return 1.959963984540054;
  return boost::math::quantile(boost::math::complement(boost::math::students_t(dof), 0.025));
}

namespace {

struct Fit {
  double a = 0, b = 0;
  bool ratio = false;  // one distinct cost: y proportional to x
  double ratio_k = 0;
};

Fit FitLine(const std::vector<std::vector<Observation>>& obs) {
  double n = 0, sx = 0, sy = 0;
  for (const auto& v : obs) {
    for (const auto& o : v) {
      n += 1;
      sx += o.cost;
      sy += o.value;
    }
  }
  Fit f;
  if (n == 0) return f;
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (const auto& v : obs) {
    for (const auto& o : v) {
      sxx += (o.cost - mx) * (o.cost - mx);
      sxy += (o.cost - mx) * (o.value - my);
    }
  }
  if (sxx <= 1e-12 * std::max(1.0, mx * mx) * n) {
    f.ratio = true;
    f.ratio_k = mx > 0 ? my / mx : 0;
    f.a = my;
    return f;
  }
  f.b = sxy / sxx;
  f.a = my - f.b * mx;
  return f;
}

double Predict(const Fit& f, double x) { return f.ratio ? f.ratio_k * x : f.a + f.b * x; }

}  // namespace

Result<MetricProjection> ProjectMetric(const Selection& selection,
                                       const std::vector<std::vector<Observation>>& obs) {
  if (obs.size() != selection.points.size()) {
    return Internal("observations for " + std::to_string(obs.size()) + " points, selection has " +
                    std::to_string(selection.points.size()));
  }
  const Fit fit = FitLine(obs);
  MetricProjection out;
  std::vector<double> yhat(obs.size(), 0);
  // Pass 1: point estimates; pooled relative within-point variance.
  double rel_ss = 0, rel_df = 0;
  double fit_rel_ss = 0, fit_n = 0;
  for (size_t p = 0; p < obs.size(); ++p) {
    const SeqPoint& pt = selection.points[p];
    const auto& v = obs[p];
    if (v.empty()) {
      yhat[p] = Predict(fit, pt.mean_cost);
      continue;
    }
    double mx = 0, my = 0;
    for (const auto& o : v) {
      mx += o.cost;
      my += o.value;
    }
    mx /= static_cast<double>(v.size());
    my /= static_cast<double>(v.size());
    if (fit.ratio) {
      yhat[p] = mx > 0 ? my * pt.mean_cost / mx : my;
    } else {
      yhat[p] = my + fit.b * (pt.mean_cost - mx);
    }
    out.samples += v.size();
    out.points += 1;
    for (const auto& o : v) {
      // Residual within the point, after removing the slope: pure measurement noise.
      double expect = fit.ratio ? (mx > 0 ? my * o.cost / mx : my) : my + fit.b * (o.cost - mx);
      double scale = std::max(std::fabs(expect), 1e-300);
      if (v.size() >= 2) rel_ss += std::pow((o.value - expect) / scale, 2);
      double pred = Predict(fit, o.cost);
      fit_rel_ss += std::pow((o.value - pred) / std::max(std::fabs(pred), 1e-300), 2);
      fit_n += 1;
    }
    if (v.size() >= 2) rel_df += static_cast<double>(v.size() - 1);
  }
  if (out.samples == 0) {
    return InvalidArgument("no SeqPoint has a measurement of this metric");
  }
  const double fit_params = fit.ratio ? 1.0 : 2.0;
  const double fit_df = std::max(0.0, fit_n - fit_params);
  double cv2 = 0, dof = 0;
  if (rel_df > 0) {
    cv2 = rel_ss / rel_df;
    dof = rel_df;
  } else if (fit_df > 0) {
    cv2 = fit_rel_ss / fit_df;
    dof = fit_df;
  }
  const double fit_cv2 = fit_df > 0 ? fit_rel_ss / fit_df : cv2;
  // Identical repeat samples (a counter that read 0 every time) say little about the noise:
  // fall back to the spread around the fit, so that an interval is never narrower than what the
  // points themselves disagree by.
  if (cv2 == 0 && fit_cv2 > 0) cv2 = fit_cv2;
  double var = 0;
  for (size_t p = 0; p < obs.size(); ++p) {
    const SeqPoint& pt = selection.points[p];
    const double w = static_cast<double>(pt.weight);
    out.total += w * yhat[p];
    const double n = static_cast<double>(obs[p].size());
    // Values are read with a resolution of one unit at best (counters are integers): a
    // quantisation variance of 1/12 per sample keeps a zero-noise estimate honest.
    constexpr double kResolutionVar = 1.0 / 12.0;
    if (n == 0) {
      var += w * w * (fit_cv2 * yhat[p] * yhat[p] + kResolutionVar);
    } else {
      const double fpc = std::max(0.0, 1.0 - n / std::max(w, n));
      var += w * w * (cv2 * yhat[p] * yhat[p] + kResolutionVar) / n * fpc;
    }
  }
  out.dof = dof;
  double half = dof > 0 ? TQuantile95(dof) * std::sqrt(var) : INFINITY;
  out.low = out.total - half;
  out.high = out.total + half;
  return out;
}

SpeedupProjection ProjectSpeedup(const MetricProjection& a, const MetricProjection& b) {
  SpeedupProjection s;
  s.speedup = b.total != 0 ? a.total / b.total : INFINITY;
  // Relative half-widths add in quadrature (the two configurations' noise is independent).
  auto rel = [](const MetricProjection& m) {
    return m.total != 0 ? (m.high - m.total) / std::fabs(m.total) : INFINITY;
  };
  double r = std::sqrt(std::pow(rel(a), 2) + std::pow(rel(b), 2));
  s.low = s.speedup * (1 - r);
  s.high = s.speedup * (1 + r);
  return s;
}

}  // namespace seqpoint::selector
