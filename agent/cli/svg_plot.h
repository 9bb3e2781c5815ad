// A tiny SVG plotter for `seqpoint report --html`: one chart with linear axes, ticks, axis
// labels with units, and a legend, written as inline <svg> markup (no scripts, no fetches).
// Callers give data coordinates; the plot maps them into its frame.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace seqpoint::cli::svg {

// Text safe inside HTML/SVG element content and attribute values.
std::string Escape(const std::string& s);
// A short human number: 3 significant digits, k/M/G suffixes for big ones.
std::string Short(double v);
// About `n` round tick values covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int n);

struct Range {
  double lo = 0;
  double hi = 1;
  // Widens an empty or inverted range and pads it by `pad` of its span on both ends.
  static Range Of(double lo, double hi, double pad = 0.05);
};

class Plot {
 public:
  Plot(std::string x_label, std::string y_label, Range x, Range y, int width = 760,
       int height = 320);

  double X(double v) const;  // data -> pixels
  double Y(double v) const;

  // Categorical x axis: these labels at x = 0..n-1 instead of numeric ticks.
  void SetCategories(std::vector<std::string> labels) { categories_ = std::move(labels); }

  // Marks, in data coordinates; `tip` becomes a <title> (hover text, no script needed).
  void Bar(double x0, double x1, double y, const std::string& color, const std::string& tip);
  void Dot(double x, double y, double r, const std::string& color, const std::string& tip,
           bool open = false);
  void Line(double x0, double y0, double x1, double y1, const std::string& color,
            double width = 1.5, bool dashed = false);
  void Polyline(const std::vector<std::pair<double, double>>& pts, const std::string& color);
  // A vertical 95% interval with caps; an unbounded top is an open arrow to the frame's top.
  void ErrorBar(double x, double lo, double hi, bool bounded, const std::string& color);
  // A downward triangle at the top of the frame over x (a SeqPoint marker).
  void TopMarker(double x, const std::string& color, const std::string& tip);
  void Note(double x, double y, const std::string& text);  // small text at data coordinates
  void AddLegend(const std::string& color, const std::string& label, bool dot = false);

  std::string Render(const std::string& aria_label) const;

 private:
  std::string Axes() const;
  std::string Legend() const;

  std::string x_label_, y_label_;
  Range x_, y_;
  int width_, height_;
  int left_ = 70, right_ = 20, top_ = 40, bottom_ = 50;
  std::vector<std::string> categories_;
  std::vector<std::pair<std::string, std::pair<std::string, bool>>> legend_;
  std::string marks_;
};

}  // namespace seqpoint::cli::svg
