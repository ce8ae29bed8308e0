// The report chart: a well-formed standalone SVG with one marker per
// experiment, the reference line, axis labels and escaped text.

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "SvgReport.h"

namespace hotkernel::cli {
namespace {

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

// A minimal XML well-formedness check: every start tag is closed in order,
// attribute values are quoted, no raw '<' or unescaped '&' in text.
// Returns "" when well-formed, else what is wrong.
std::string checkWellFormed(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      static const std::regex entity("^&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
      std::smatch m;
      std::string rest = xml.substr(i, 12);
      if (!std::regex_search(rest, m, entity)) return "bad entity at " + std::to_string(i);
      i += m.length(0);
      continue;
    }
    if (xml[i] != '<') {
      if (xml[i] == '>') return "raw '>' in text at " + std::to_string(i);
      ++i;
      continue;
    }
    size_t end = i + 1;
    char quote = 0;
    while (end < xml.size() && (quote || xml[end] != '>')) {
      if (quote && xml[end] == quote) {
        quote = 0;
      } else if (!quote && (xml[end] == '"' || xml[end] == '\'')) {
        quote = xml[end];
      } else if (xml[end] == '<') {
        return "'<' inside a tag at " + std::to_string(end);
      }
      ++end;
    }
    if (end >= xml.size()) return "unterminated tag at " + std::to_string(i);
    std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(i);
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return "closing </" + name + "> but open is <" + (open.empty() ? "" : open.back()) + ">";
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
    }
    i = end + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return "";
}

Experiment experiment(const std::string& variant, std::optional<double> speedup, ExperimentDecision d, int64_t id) {
  Experiment e;
  e.time = 1000 + static_cast<double>(id);
  e.op = "aten::_softmax";
  e.variant = variant;
  e.candidateId = id;
  e.params = {{"threads", 256}, {"vec", 8}};
  e.timings.speedup = speedup;
  if (speedup) e.timings.speedupCi = {{*speedup - 0.03, *speedup + 0.03}};
  e.decision = d;
  return e;
}

std::vector<Experiment> sample() {
  const std::string a = "dtype=bfloat16;rows=4096;cols=32000";
  const std::string b = "dtype=float32;rows=8;cols=128256";
  return {experiment(a, 0.92, ExperimentDecision::Rejected, 1),
          experiment(a, 1.10, ExperimentDecision::Rejected, 2),
          experiment(b, std::nullopt, ExperimentDecision::Rejected, 3),
          experiment(a, 1.31, ExperimentDecision::Accepted, 4),
          experiment(b, 1.05, ExperimentDecision::Rejected, 5),
          experiment(b, std::nullopt, ExperimentDecision::KeptAten, 6)};
}

TEST(SvgReportTest, GivenExperimentsWhenRenderedThenWellFormedSvgWithOneMarkerEach) {
  std::string svg = renderSpeedupSvg(sample());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << svg.substr(0, 80);
  EXPECT_EQ(checkWellFormed(svg), "");
  EXPECT_EQ(count(svg, "class=\"marker "), 6u);
  EXPECT_EQ(count(svg, "class=\"marker accepted\""), 1u);
  EXPECT_EQ(count(svg, "class=\"marker measured\""), 3u);
  EXPECT_EQ(count(svg, "class=\"marker failed\""), 2u);
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

TEST(SvgReportTest, GivenExperimentsWhenRenderedThenTitleAxesReferenceLineAndLegend) {
  SvgReportOptions options;
  options.title = "softmax tuning";
  std::string svg = renderSpeedupSvg(sample(), options);
  EXPECT_NE(svg.find(">softmax tuning</text>"), std::string::npos);
  EXPECT_NE(svg.find("experiment (time order)"), std::string::npos);
  EXPECT_NE(svg.find("speed-up vs ATen"), std::string::npos);
  EXPECT_NE(svg.find("class=\"reference\""), std::string::npos);
  EXPECT_NE(svg.find("1.0x: as fast as ATen"), std::string::npos);
  EXPECT_NE(svg.find("6 experiments, 4 timed, 1 accepted; best 1.31x (#4)"), std::string::npos);
  // One legend entry per variant, each in its own colour.
  EXPECT_NE(svg.find(">dtype=bfloat16;rows=4096;cols=32000</text>"), std::string::npos);
  EXPECT_NE(svg.find(">dtype=float32;rows=8;cols=128256</text>"), std::string::npos);
  EXPECT_NE(svg.find("fill=\"#4e79a7\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"#f28e2b\""), std::string::npos);
  // CI bars for the timed experiments.
  size_t ci = svg.find("<g class=\"ci\"");
  ASSERT_NE(ci, std::string::npos);
  EXPECT_EQ(count(svg.substr(ci, svg.find("</g>", ci) - ci), "<line"), 4u);
}

TEST(SvgReportTest, GivenHigherSpeedupWhenRenderedThenMarkerIsHigherOnTheChart) {
  std::vector<Experiment> two = {experiment("v", 1.5, ExperimentDecision::Rejected, 1),
                                 experiment("v", 0.8, ExperimentDecision::Rejected, 2)};
  std::string svg = renderSpeedupSvg(two);
  std::regex circle("<circle class=\"marker measured\" cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  std::vector<std::pair<double, double>> xy;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it) {
    xy.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  ASSERT_EQ(xy.size(), 2u);
  EXPECT_LT(xy[0].first, xy[1].first);    // time order left to right
  EXPECT_LT(xy[0].second, xy[1].second);  // SVG y grows downwards: 1.5x is above 0.8x
}

TEST(SvgReportTest, GivenMarkupInTextWhenRenderedThenEscaped) {
  Experiment e = experiment("rows=<8>&cols=\"1\"", 1.2, ExperimentDecision::Accepted, 1);
  e.reason = "a </title><script>alert('x')</script> \x01 reason";
  e.params = {{"name", "<b>"}};
  SvgReportOptions options;
  options.title = "A & B <test>";
  std::string svg = renderSpeedupSvg({e}, options);
  EXPECT_EQ(checkWellFormed(svg), "");
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("&lt;/title&gt;&lt;script&gt;alert(&apos;x&apos;)"), std::string::npos);
  EXPECT_NE(svg.find("A &amp; B &lt;test&gt;"), std::string::npos);
  EXPECT_NE(svg.find("rows=&lt;8&gt;&amp;cols=&quot;1&quot;"), std::string::npos);
  EXPECT_EQ(svg.find('\x01'), std::string::npos);
}

TEST(SvgReportTest, GivenNoExperimentsWhenRenderedThenEmptyButWellFormedChart) {
  std::string svg = renderSpeedupSvg({});
  EXPECT_EQ(checkWellFormed(svg), "");
  EXPECT_EQ(count(svg, "class=\"marker "), 0u);
  EXPECT_NE(svg.find("0 experiments"), std::string::npos);
}

TEST(SvgReportTest, GivenManySeriesAndExperimentsWhenRenderedThenLegendCappedAndMarkersComplete) {
  std::vector<Experiment> many;
  for (int i = 0; i < 400; ++i) {
    many.push_back(experiment("variant-" + std::to_string(i % 20), 0.5 + (i % 37) * 0.05,
                              i % 50 == 0 ? ExperimentDecision::Accepted : ExperimentDecision::Rejected, i));
  }
  std::string svg = renderSpeedupSvg(many);
  EXPECT_EQ(checkWellFormed(svg), "");
  EXPECT_EQ(count(svg, "class=\"marker "), 400u);
  EXPECT_NE(svg.find("+8 more"), std::string::npos);
}

TEST(SvgReportTest, GivenTextWhenEscapedThenEntitiesAndControlCharacters) {
  EXPECT_EQ(escapeXml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(escapeXml("tab\tnew\nbell\x07"), "tab\tnew\nbell ");
  EXPECT_EQ(escapeXml("caf\xC3\xA9"), "caf\xC3\xA9");  // UTF-8 passes through
}

TEST(SvgReportTest, GivenParamsWhenFormattedThenOneLineInKeyOrder) {
  EXPECT_EQ(formatParams({{"vec", 8}, {"threads", 256}, {"kind", "split"}}), "kind=split threads=256 vec=8");
  EXPECT_EQ(formatParams(nlohmann::json::object()), "-");
  EXPECT_EQ(formatParams(nlohmann::json(3)), "-");
}

}  // namespace
}  // namespace hotkernel::cli
