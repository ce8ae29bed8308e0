#include "SvgReport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace hotkernel::cli {
namespace {

// Ten colours that stay apart for common colour-vision deficiencies (Tableau 10).
const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
constexpr size_t kMaxLegendSeries = 12;
constexpr size_t kMaxLegendChars = 38;

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// A step of 1, 2, 2.5 or 5 times a power of ten giving about `ticks` intervals over `span`.
double niceStep(double span, int ticks, bool integer) {
  const double raw = std::max(span, 1e-9) / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    const double step = m * magnitude;
    if (step >= raw && (!integer || std::floor(step) == step)) return integer ? std::max(1.0, step) : step;
  }
  return integer ? std::max(1.0, std::ceil(10 * magnitude)) : 10 * magnitude;
}

// Labels of tick values: as many decimals as the step needs.
std::string tickLabel(double v, double step) {
  int digits = 0;
  while (digits < 4 && std::fabs(step * std::pow(10.0, digits) - std::round(step * std::pow(10.0, digits))) > 1e-6) {
    ++digits;
  }
  return fixed(v, digits);
}

// UTF-8-safe shortening with an ellipsis.
std::string shorten(const std::string& s, size_t maxChars) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && ++chars > maxChars) {
      return s.substr(0, i) + "\xE2\x80\xA6";
    }
  }
  return s;
}

std::string tooltip(size_t index, const Experiment& e, const std::string& series) {
  std::ostringstream os;
  os << "#" << index << "  " << series << "\n";
  os << "candidate " << (e.candidateId ? std::to_string(*e.candidateId) : "-") << ", parent "
     << (e.parentId ? std::to_string(*e.parentId) : "-") << "\n";
  os << "params: " << formatParams(e.params) << "\n";
  if (e.timings.speedup) {
    os << "speed-up " << fixed(*e.timings.speedup) << "x";
    if (e.timings.speedupCi) {
      os << " [" << fixed(e.timings.speedupCi->first) << ", " << fixed(e.timings.speedupCi->second) << "]";
    }
    if (e.timings.kernelUs && e.timings.atenUs) {
      os << " (" << fixed(*e.timings.kernelUs, 1) << " us vs ATen " << fixed(*e.timings.atenUs, 1) << " us)";
    }
    os << "\n";
  } else {
    os << "not timed\n";
  }
  os << toString(e.decision);
  if (!e.reason.empty()) os << ": " << e.reason;
  return os.str();
}

}  // namespace

std::string escapeXml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string formatParams(const nlohmann::json& params) {
  if (!params.is_object() || params.empty()) return "-";
  std::string out;
  for (const auto& [key, value] : params.items()) {
    if (!out.empty()) out += ' ';
    out += key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

std::string renderSpeedupSvg(const std::vector<Experiment>& experiments, const SvgReportOptions& options) {
  const double width = std::max(options.width, 480);
  const double height = std::max(options.height, 320);
  const double left = 80, top = 72, right = width - 320, bottom = height - 64;
  const size_t n = experiments.size();

  // Series: one per variant, in order of first appearance ("op variant" when ops differ).
  bool severalOps = false;
  for (const Experiment& e : experiments) severalOps = severalOps || e.op != experiments.front().op;
  std::vector<std::string> seriesNames;
  std::map<std::string, size_t> seriesIndex;
  std::vector<size_t> seriesOf(n);
  for (size_t i = 0; i < n; ++i) {
    const Experiment& e = experiments[i];
    std::string name = severalOps ? e.op + " " + e.variant : e.variant;
    auto [it, inserted] = seriesIndex.emplace(name, seriesNames.size());
    if (inserted) seriesNames.push_back(name);
    seriesOf[i] = it->second;
  }
  auto colour = [](size_t series) { return kPalette[series % kPaletteSize]; };

  // Axes. y always shows the 1.0x line.
  double lo = 1.0, hi = 1.0;
  size_t accepted = 0, timed = 0;
  double best = 0;
  size_t bestIndex = 0;
  for (size_t i = 0; i < n; ++i) {
    const Experiment& e = experiments[i];
    accepted += e.decision == ExperimentDecision::Accepted ? 1 : 0;
    if (!e.timings.speedup) continue;
    ++timed;
    lo = std::min(lo, *e.timings.speedup);
    hi = std::max(hi, *e.timings.speedup);
    if (e.timings.speedupCi) {
      lo = std::min(lo, e.timings.speedupCi->first);
      hi = std::max(hi, e.timings.speedupCi->second);
    }
    if (*e.timings.speedup > best) {
      best = *e.timings.speedup;
      bestIndex = i + 1;
    }
  }
  const double pad = std::max(0.05, (hi - lo) * 0.08);
  lo = std::max(0.0, lo - pad);
  hi += pad;
  const double yStep = niceStep(hi - lo, 6, false);
  lo = std::floor(lo / yStep + 1e-9) * yStep;
  hi = std::ceil(hi / yStep - 1e-9) * yStep;
  const double xLo = 0.5, xHi = static_cast<double>(std::max<size_t>(n, 1)) + 0.5;
  const double xStep = niceStep(xHi - xLo, 10, true);
  auto px = [&](double x) { return left + (x - xLo) / (xHi - xLo) * (right - left); };
  auto py = [&](double y) { return bottom - (y - lo) / (hi - lo) * (bottom - top); };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  svg << "<title>" << escapeXml(options.title) << "</title>\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height << "\" fill=\"#ffffff\"/>\n";

  // Title and subtitle.
  const double centre = (left + right) / 2;
  svg << "<text x=\"" << fixed(centre) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">"
      << escapeXml(options.title) << "</text>\n";
  std::string summary = std::to_string(n) + (n == 1 ? " experiment" : " experiments") + ", " + std::to_string(timed) +
                        " timed, " + std::to_string(accepted) + " accepted";
  if (timed > 0) summary += "; best " + fixed(best) + "x (#" + std::to_string(bestIndex) + ")";
  svg << "<text x=\"" << fixed(centre) << "\" y=\"48\" text-anchor=\"middle\" fill=\"#555555\">"
      << escapeXml(options.subtitle.empty() ? summary : options.subtitle + " \xE2\x80\x94 " + summary) << "</text>\n";

  // Plot frame, grid and ticks.
  svg << "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (double y = lo; y <= hi + yStep * 1e-6; y += yStep) {
    svg << "<line x1=\"" << fixed(left) << "\" y1=\"" << fixed(py(y)) << "\" x2=\"" << fixed(right) << "\" y2=\""
        << fixed(py(y)) << "\"/>\n";
  }
  svg << "</g>\n";
  svg << "<rect class=\"frame\" x=\"" << fixed(left) << "\" y=\"" << fixed(top) << "\" width=\"" << fixed(right - left)
      << "\" height=\"" << fixed(bottom - top) << "\" fill=\"none\" stroke=\"#333333\"/>\n";
  svg << "<g class=\"y-ticks\" text-anchor=\"end\" fill=\"#333333\">\n";
  for (double y = lo; y <= hi + yStep * 1e-6; y += yStep) {
    svg << "<text x=\"" << fixed(left - 8) << "\" y=\"" << fixed(py(y) + 4) << "\">" << tickLabel(y, yStep)
        << "x</text>\n";
  }
  svg << "</g>\n";
  svg << "<g class=\"x-ticks\" text-anchor=\"middle\" fill=\"#333333\">\n";
  for (double x = xStep > 1 ? xStep : 1; x <= xHi; x += xStep) {  // 1, 2, 3 ... or 10, 20, 30 ...
    svg << "<line x1=\"" << fixed(px(x)) << "\" y1=\"" << fixed(bottom) << "\" x2=\"" << fixed(px(x)) << "\" y2=\""
        << fixed(bottom + 5) << "\" stroke=\"#333333\"/>\n";
    svg << "<text x=\"" << fixed(px(x)) << "\" y=\"" << fixed(bottom + 19) << "\">" << fixed(x, 0) << "</text>\n";
  }
  svg << "</g>\n";

  // Axis labels.
  svg << "<text class=\"axis-label\" x=\"" << fixed(centre) << "\" y=\"" << fixed(height - 18)
      << "\" text-anchor=\"middle\">experiment (time order)</text>\n";
  svg << "<text class=\"axis-label\" x=\"22\" y=\"" << fixed((top + bottom) / 2)
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 22 " << fixed((top + bottom) / 2)
      << ")\">speed-up vs ATen (ATen time / kernel time)</text>\n";

  // The 1.0x reference line.
  svg << "<line class=\"reference\" x1=\"" << fixed(left) << "\" y1=\"" << fixed(py(1.0)) << "\" x2=\"" << fixed(right)
      << "\" y2=\"" << fixed(py(1.0)) << "\" stroke=\"#333333\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"/>\n";

  // Confidence intervals first, so the markers are drawn over them.
  svg << "<g class=\"ci\" stroke-width=\"1.2\" stroke-opacity=\"0.6\">\n";
  for (size_t i = 0; i < n; ++i) {
    const Experiment& e = experiments[i];
    if (!e.timings.speedup || !e.timings.speedupCi) continue;
    const double x = px(static_cast<double>(i + 1));
    svg << "<line x1=\"" << fixed(x) << "\" y1=\"" << fixed(py(e.timings.speedupCi->first)) << "\" x2=\"" << fixed(x)
        << "\" y2=\"" << fixed(py(e.timings.speedupCi->second)) << "\" stroke=\"" << colour(seriesOf[i]) << "\"/>\n";
  }
  svg << "</g>\n";

  // One marker per experiment (Note [Report chart]).
  svg << "<g class=\"markers\">\n";
  for (size_t i = 0; i < n; ++i) {
    const Experiment& e = experiments[i];
    const double x = px(static_cast<double>(i + 1));
    const char* c = colour(seriesOf[i]);
    const std::string title = "<title>" + escapeXml(tooltip(i + 1, e, seriesNames[seriesOf[i]])) + "</title>";
    if (!e.timings.speedup) {
      const double y = bottom - 7;
      svg << "<path class=\"marker failed\" d=\"M" << fixed(x - 4) << " " << fixed(y - 4) << " L" << fixed(x + 4) << " "
          << fixed(y + 4) << " M" << fixed(x - 4) << " " << fixed(y + 4) << " L" << fixed(x + 4) << " " << fixed(y - 4)
          << "\" stroke=\"" << c << "\" stroke-width=\"2\" fill=\"none\">" << title << "</path>\n";
    } else if (e.decision == ExperimentDecision::Accepted) {
      const double y = py(*e.timings.speedup);
      svg << "<path class=\"marker accepted\" d=\"M" << fixed(x) << " " << fixed(y - 7) << " L" << fixed(x + 7) << " "
          << fixed(y) << " L" << fixed(x) << " " << fixed(y + 7) << " L" << fixed(x - 7) << " " << fixed(y)
          << " Z\" fill=\"" << c << "\" stroke=\"#000000\" stroke-width=\"1.5\">" << title << "</path>\n";
    } else {
      svg << "<circle class=\"marker measured\" cx=\"" << fixed(x) << "\" cy=\"" << fixed(py(*e.timings.speedup))
          << "\" r=\"4\" fill=\"" << c << "\" fill-opacity=\"0.8\">" << title << "</circle>\n";
    }
  }
  svg << "</g>\n";

  // Legend: series, then the marker shapes.
  const double lx = right + 20;
  double ly = top + 4;
  svg << "<g class=\"legend\">\n";
  svg << "<text x=\"" << fixed(lx) << "\" y=\"" << fixed(ly) << "\" font-weight=\"bold\">"
      << (severalOps ? "op, variant" : "variant") << "</text>\n";
  for (size_t s = 0; s < seriesNames.size() && s < kMaxLegendSeries; ++s) {
    ly += 18;
    svg << "<rect x=\"" << fixed(lx) << "\" y=\"" << fixed(ly - 9) << "\" width=\"10\" height=\"10\" fill=\""
        << colour(s) << "\"/>\n";
    svg << "<text x=\"" << fixed(lx + 16) << "\" y=\"" << fixed(ly) << "\" font-size=\"11\"><title>"
        << escapeXml(seriesNames[s]) << "</title>" << escapeXml(shorten(seriesNames[s], kMaxLegendChars))
        << "</text>\n";
  }
  if (seriesNames.size() > kMaxLegendSeries) {
    ly += 18;
    svg << "<text x=\"" << fixed(lx + 16) << "\" y=\"" << fixed(ly) << "\" font-size=\"11\" fill=\"#555555\">+"
        << seriesNames.size() - kMaxLegendSeries << " more (colours repeat)</text>\n";
  }
  ly += 30;
  svg << "<path d=\"M" << fixed(lx + 5) << " " << fixed(ly - 11) << " L" << fixed(lx + 11) << " " << fixed(ly - 5)
      << " L" << fixed(lx + 5) << " " << fixed(ly + 1) << " L" << fixed(lx - 1) << " " << fixed(ly - 5)
      << " Z\" fill=\"#bbbbbb\" stroke=\"#000000\" stroke-width=\"1.5\"/>\n";
  svg << "<text x=\"" << fixed(lx + 16) << "\" y=\"" << fixed(ly) << "\" font-size=\"11\">accepted</text>\n";
  ly += 18;
  svg << "<circle cx=\"" << fixed(lx + 5) << "\" cy=\"" << fixed(ly - 4) << "\" r=\"4\" fill=\"#bbbbbb\"/>\n";
  svg << "<text x=\"" << fixed(lx + 16) << "\" y=\"" << fixed(ly)
      << "\" font-size=\"11\">timed, not accepted (bar: 95% CI)</text>\n";
  ly += 18;
  svg << "<path d=\"M" << fixed(lx + 1) << " " << fixed(ly - 8) << " L" << fixed(lx + 9) << " " << fixed(ly) << " M"
      << fixed(lx + 1) << " " << fixed(ly) << " L" << fixed(lx + 9) << " " << fixed(ly - 8)
      << "\" stroke=\"#888888\" stroke-width=\"2\" fill=\"none\"/>\n";
  svg << "<text x=\"" << fixed(lx + 16) << "\" y=\"" << fixed(ly)
      << "\" font-size=\"11\">failed before timing</text>\n";
  // The reference line's key lives here, not on the line, so it never covers a marker.
  ly += 18;
  svg << "<line x1=\"" << fixed(lx - 1) << "\" y1=\"" << fixed(ly - 4) << "\" x2=\"" << fixed(lx + 11) << "\" y2=\""
      << fixed(ly - 4) << "\" stroke=\"#333333\" stroke-width=\"1.2\" stroke-dasharray=\"4 2\"/>\n";
  svg << "<text x=\"" << fixed(lx + 16) << "\" y=\"" << fixed(ly)
      << "\" font-size=\"11\">1.0x: as fast as ATen</text>\n";
  svg << "</g>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace hotkernel::cli
