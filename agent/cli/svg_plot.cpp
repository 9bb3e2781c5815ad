#include "agent/cli/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace seqpoint::cli::svg {
namespace {

std::string Fmt(double v) {  // pixel coordinates
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Title(const std::string& tip) {
  return tip.empty() ? "" : "<title>" + Escape(tip) + "</title>";
}

}  // namespace

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Short(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::fabs(v);
  const char* suffix = "";
  if (a >= 1e9) v /= 1e9, suffix = "G";
  else if (a >= 1e6) v /= 1e6, suffix = "M";
  else if (a >= 1e4) v /= 1e3, suffix = "k";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%s", v, suffix);
  return buf;
}

std::vector<double> NiceTicks(double lo, double hi, int n) {
  std::vector<double> ticks;
  if (!(hi > lo) || n < 1) return {lo};
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

Range Range::Of(double lo, double hi, double pad) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d, hi += d;
  }
  const double span = hi - lo;
  return {lo - span * pad, hi + span * pad};
}

Plot::Plot(std::string x_label, std::string y_label, Range x, Range y, int width, int height)
    : x_label_(std::move(x_label)), y_label_(std::move(y_label)), x_(x), y_(y),
      width_(width), height_(height) {}

double Plot::X(double v) const {
  return left_ + (v - x_.lo) / (x_.hi - x_.lo) * (width_ - left_ - right_);
}

double Plot::Y(double v) const {
  return height_ - bottom_ - (v - y_.lo) / (y_.hi - y_.lo) * (height_ - top_ - bottom_);
}

void Plot::Bar(double x0, double x1, double y, const std::string& color, const std::string& tip) {
  const double base = Y(std::max(y_.lo, 0.0));
  const double top = Y(y);
  marks_ += "<rect x=\"" + Fmt(X(x0)) + "\" y=\"" + Fmt(std::min(top, base)) + "\" width=\"" +
            Fmt(std::max(1.0, X(x1) - X(x0))) + "\" height=\"" + Fmt(std::fabs(base - top)) +
            "\" fill=\"" + color + "\">" + Title(tip) + "</rect>\n";
}

void Plot::Dot(double x, double y, double r, const std::string& color, const std::string& tip,
               bool open) {
  marks_ += "<circle cx=\"" + Fmt(X(x)) + "\" cy=\"" + Fmt(Y(y)) + "\" r=\"" + Fmt(r) + "\" " +
            (open ? "fill=\"white\" stroke=\"" + color + "\" stroke-width=\"1.5\""
                  : "fill=\"" + color + "\"") +
            ">" + Title(tip) + "</circle>\n";
}

void Plot::Line(double x0, double y0, double x1, double y1, const std::string& color,
                double width, bool dashed) {
  marks_ += "<path d=\"M" + Fmt(X(x0)) + " " + Fmt(Y(y0)) + " L" + Fmt(X(x1)) + " " +
            Fmt(Y(y1)) + "\" stroke=\"" + color + "\" stroke-width=\"" + Fmt(width) + "\"" +
            (dashed ? " stroke-dasharray=\"5 4\"" : "") + " fill=\"none\"/>\n";
}

void Plot::Polyline(const std::vector<std::pair<double, double>>& pts, const std::string& color) {
  if (pts.empty()) return;
  std::string d;
  for (const auto& [x, y] : pts) d += (d.empty() ? "M" : " L") + Fmt(X(x)) + " " + Fmt(Y(y));
  marks_ += "<path d=\"" + d + "\" stroke=\"" + color +
            "\" stroke-width=\"1.5\" fill=\"none\"/>\n";
}

void Plot::ErrorBar(double x, double lo, double hi, bool bounded, const std::string& color) {
  const double px = X(x), cap = 8;
  const double y_lo = Y(lo), y_hi = bounded ? Y(hi) : top_;
  marks_ += "<path d=\"M" + Fmt(px) + " " + Fmt(y_lo) + " L" + Fmt(px) + " " + Fmt(y_hi) +
            " M" + Fmt(px - cap) + " " + Fmt(y_lo) + " L" + Fmt(px + cap) + " " + Fmt(y_lo) +
            "\" stroke=\"" + color + "\" stroke-width=\"2\" fill=\"none\"/>\n";
  if (bounded) {
    marks_ += "<path d=\"M" + Fmt(px - cap) + " " + Fmt(y_hi) + " L" + Fmt(px + cap) + " " +
              Fmt(y_hi) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
  } else {  // open arrow head: no upper bound
    marks_ += "<path d=\"M" + Fmt(px - 7) + " " + Fmt(y_hi + 10) + " L" + Fmt(px) + " " +
              Fmt(y_hi) + " L" + Fmt(px + 7) + " " + Fmt(y_hi + 10) + "\" stroke=\"" + color +
              "\" stroke-width=\"2\" fill=\"none\"><title>no upper bound</title></path>\n";
  }
}

void Plot::TopMarker(double x, const std::string& color, const std::string& tip) {
  const double px = X(x), py = top_;
  marks_ += "<path d=\"M" + Fmt(px - 5) + " " + Fmt(py - 9) + " L" + Fmt(px + 5) + " " +
            Fmt(py - 9) + " L" + Fmt(px) + " " + Fmt(py) + " Z\" fill=\"" + color + "\">" +
            Title(tip) + "</path>\n";
  marks_ += "<path d=\"M" + Fmt(px) + " " + Fmt(py) + " L" + Fmt(px) + " " +
            Fmt(height_ - bottom_) + "\" stroke=\"" + color +
            "\" stroke-width=\"1\" stroke-dasharray=\"2 3\" fill=\"none\"/>\n";
}

void Plot::Note(double x, double y, const std::string& text) {
  marks_ += "<text x=\"" + Fmt(X(x) + 8) + "\" y=\"" + Fmt(Y(y) + 4) +
            "\" font-size=\"11\" fill=\"#333\">" + Escape(text) + "</text>\n";
}

void Plot::AddLegend(const std::string& color, const std::string& label, bool dot) {
  legend_.push_back({label, {color, dot}});
}

std::string Plot::Axes() const {
  const double x0 = left_, x1 = width_ - right_, y0 = height_ - bottom_, y1 = top_;
  std::string s = "<rect x=\"" + Fmt(x0) + "\" y=\"" + Fmt(y1) + "\" width=\"" + Fmt(x1 - x0) +
                  "\" height=\"" + Fmt(y0 - y1) + "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (double t : NiceTicks(y_.lo, y_.hi, 5)) {
    s += "<path d=\"M" + Fmt(x0 - 4) + " " + Fmt(Y(t)) + " L" + Fmt(x1) + " " + Fmt(Y(t)) +
         "\" stroke=\"#e4e4e4\"/>\n<text x=\"" + Fmt(x0 - 7) + "\" y=\"" + Fmt(Y(t) + 4) +
         "\" font-size=\"11\" text-anchor=\"end\">" + Short(t) + "</text>\n";
  }
  std::vector<std::pair<double, std::string>> xt;
  if (!categories_.empty()) {
    for (size_t i = 0; i < categories_.size(); ++i) xt.push_back({double(i), categories_[i]});
  } else {
    for (double t : NiceTicks(x_.lo, x_.hi, 8)) xt.push_back({t, Short(t)});
  }
  for (const auto& [t, label] : xt) {
    s += "<path d=\"M" + Fmt(X(t)) + " " + Fmt(y0) + " L" + Fmt(X(t)) + " " + Fmt(y0 + 4) +
         "\" stroke=\"#666\"/>\n<text x=\"" + Fmt(X(t)) + "\" y=\"" + Fmt(y0 + 17) +
         "\" font-size=\"11\" text-anchor=\"middle\">" + Escape(label) + "</text>\n";
  }
  s += "<text x=\"" + Fmt((x0 + x1) / 2) + "\" y=\"" + Fmt(height_ - 8.0) +
       "\" font-size=\"12\" text-anchor=\"middle\">" + Escape(x_label_) + "</text>\n";
  s += "<text transform=\"translate(16 " + Fmt((y0 + y1) / 2) +
       ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">" + Escape(y_label_) +
       "</text>\n";
  return s;
}

std::string Plot::Legend() const {
  std::string s;
  double x = left_ + 8;
  for (const auto& [label, how] : legend_) {
    const auto& [color, dot] = how;
    s += dot ? "<circle cx=\"" + Fmt(x + 5) + "\" cy=\"" + Fmt(top_ - 26.0) + "\" r=\"4\" fill=\"" +
                   color + "\"/>"
             : "<rect x=\"" + Fmt(x) + "\" y=\"" + Fmt(top_ - 31.0) +
                   "\" width=\"10\" height=\"10\" fill=\"" + color + "\"/>";
    s += "<text x=\"" + Fmt(x + 14) + "\" y=\"" + Fmt(top_ - 22.0) + "\" font-size=\"11\">" +
         Escape(label) + "</text>\n";
    x += 30 + 6.5 * label.size();
  }
  return s;
}

std::string Plot::Render(const std::string& aria_label) const {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + std::to_string(width_) +
         " " + std::to_string(height_) + "\" role=\"img\" aria-label=\"" + Escape(aria_label) +
         "\" font-family=\"sans-serif\">\n" + Axes() + marks_ + Legend() + "</svg>\n";
}

}  // namespace seqpoint::cli::svg
