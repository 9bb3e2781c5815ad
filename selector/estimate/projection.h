// Projection of a metric's whole-run total from the SeqPoints' measurements, with a 95% interval.
//
// Estimator (stated in the README): for point p with weight W_p (iterations it stands for),
// bin mean cost proxy X_p, and samples (x_i, y_i) of the metric:
//   total = sum_p W_p * yhat_p,  yhat_p = mean(y_i) + b * (X_p - mean(x_i))
// i.e. the paper's count(bin) x value(representative), where the representative's value is
// the mean of its repeat samples, adjusted along the run-wide linear fit y ~ a + b*x for the
// small gap between the sampled SLs and the bin's mean (a regression estimator; b = 0 when all
// samples share one cost, then a ratio adjustment y * X_p / x is used instead).
// A point whose samples lack this metric (another counter group) takes the fit a + b*X_p.
//
// Interval: measurement noise is taken as proportional to the value (constant coefficient of
// variation, pooled over points with repeats; ours and the paper's traces show time noise
// scales with iteration cost). Var = sum_p W_p^2 * cv^2 * yhat_p^2 / n_p * (1 - n_p/W_p), plus
// for points without samples the fit's residual variance. The half-width is Student's t at
// 95% with the pooled degrees of freedom. Without any repeat, the residuals around the fit
// stand in for noise (conservative: they include model misfit).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "selector/selection.h"

namespace seqpoint::selector {

struct Observation {
  double cost = 0;   // cost proxy of the measured iteration
  double value = 0;  // the metric's value on it
};

struct MetricProjection {
  double total = 0;
  double low = 0, high = 0;  // 95% interval
  uint64_t samples = 0;      // observations used
  uint64_t points = 0;       // points that had at least one observation
  double dof = 0;            // degrees of freedom of the noise estimate
};

// observations[p] are the measurements of selection.points[p] (any may be empty).
Result<MetricProjection> ProjectMetric(const Selection& selection,
                                       const std::vector<std::vector<Observation>>& observations);

struct SpeedupProjection {
  double speedup = 0;  // total(baseline) / total(candidate)
  double low = 0, high = 0;
};
// Speedup of configuration B over A when both were measured on the same selection.
SpeedupProjection ProjectSpeedup(const MetricProjection& a, const MetricProjection& b);

// Two-sided 95% Student t quantile.
double TQuantile95(double dof);

}  // namespace seqpoint::selector
