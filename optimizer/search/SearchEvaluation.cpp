// How the search measures: new candidates enter the lineage and go to the
// batch evaluator as one batch per call, survivors are re-measured at a
// higher budget level, results (or the evaluator's exception) land in the
// candidates' nodes.

#include <algorithm>
#include <cmath>
#include <exception>

#include "SearchRun.h"
#include "hotkernel/runtime/Logging.h"

namespace hotkernel::detail {

void SearchRun::evaluateInto(const std::vector<int>& ids, int level) {
  if (ids.empty()) return;
  std::vector<SearchPoint> points;
  points.reserve(ids.size());
  for (int id : ids) points.push_back(result_.lineage[static_cast<size_t>(id)].point);
  result_.evaluations += static_cast<int>(ids.size());

  std::vector<Evaluation> results;
  std::string thrown;
  try {
    results = evaluate_(points, level);
  } catch (const std::exception& e) {
    thrown = std::string("evaluator threw: ") + e.what();
  } catch (...) {
    thrown = "evaluator threw an unknown exception";
  }
  if (thrown.empty()) {
    HOTKERNEL_CHECK(results.size() == ids.size(), "the batch evaluator returned ", results.size(), " results for ",
                    ids.size(), " points");
  } else {
    HOTKERNEL_LOG(Debug) << "search: " << thrown;
    results.assign(ids.size(), Evaluation::failed(thrown));
  }

  for (size_t i = 0; i < ids.size(); ++i) {
    Candidate& c = result_.lineage[static_cast<size_t>(ids[i])];
    Evaluation& e = results[i];
    c.evaluations += 1;
    c.budgetLevel = level;
    if (e.cost && std::isfinite(*e.cost) && *e.cost >= 0) {
      c.cost = e.cost;
      c.failure.clear();
    } else {
      c.cost.reset();
      if (e.cost) {
        c.failure = "invalid cost " + std::to_string(*e.cost);
      } else {
        c.failure = e.failure.empty() ? "failed" : std::move(e.failure);
      }
    }
    if (observer_) observer_(c);
  }
}

std::vector<int> SearchRun::evaluateNew(std::vector<Pending> pending, int round, int level) {
  if (static_cast<int>(pending.size()) > remaining()) pending.resize(static_cast<size_t>(std::max(0, remaining())));
  std::vector<int> ids;
  for (Pending& p : pending) {
    Candidate c;
    c.id = static_cast<int>(result_.lineage.size());
    c.parentId = p.parentId;
    c.origin = p.origin;
    c.round = round;
    c.tier = p.tier;
    c.dimension = std::move(p.dimension);
    c.mutation = std::move(p.mutation);
    c.point = std::move(p.point);
    c.budgetLevel = level;
    seen_.insert(c.point);
    ids.push_back(c.id);
    result_.lineage.push_back(std::move(c));
  }
  evaluateInto(ids, level);
  return ids;
}

void SearchRun::remeasure(const std::vector<int>& ids, int level) {
  std::vector<int> todo;
  for (int id : ids) {
    if (static_cast<int>(todo.size()) >= remaining()) break;
    if (result_.lineage[static_cast<size_t>(id)].budgetLevel < level) todo.push_back(id);
  }
  evaluateInto(todo, level);
}

std::vector<int> SearchRun::okSortedByCost(const std::vector<int>& ids) const {
  std::vector<int> ok;
  for (int id : ids) {
    if (result_.lineage[static_cast<size_t>(id)].ok()) ok.push_back(id);
  }
  std::stable_sort(ok.begin(), ok.end(), [this](int a, int b) {
    return *result_.lineage[static_cast<size_t>(a)].cost < *result_.lineage[static_cast<size_t>(b)].cost;
  });
  return ok;
}

}  // namespace hotkernel::detail
