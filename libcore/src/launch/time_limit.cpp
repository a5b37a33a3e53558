#include "shardtrain/launch/time_limit.hpp"

#include <cmath>

#include "shardtrain/base/time.hpp"

namespace shardtrain::launch {

std::optional<std::int64_t> checkpoint_step(const std::string& name) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.rfind(prefix, 0) != 0) return std::nullopt;
  std::int64_t step = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string TimeLimitStop::begin(double now, const std::string& latest) {
  if (begun_) return "";
  begun_ = true;
  warned_at_ = now;
  before_ = latest;
  return format_rfc3339(std::int64_t(now)) + " time limit near: asking every rank to checkpoint (latest: " +
         (latest.empty() ? "none" : latest) + ")";
}

std::string TimeLimitStop::resumes_from() const { return before_.empty() ? "the start" : before_; }

std::optional<std::string> TimeLimitStop::note_checkpoint(double now, const std::string& latest) {
  if (settled_at_ || latest.empty() || latest == before_) return std::nullopt;
  settled_at_ = now;
  return "checkpoint " + latest + " committed after " + std::to_string(std::int64_t(now - warned_at_)) + "s";
}

TimeLimitStop::Poll TimeLimitStop::poll(double now, const std::string& latest) {
  Poll p;
  if (!begun_) return p;
  if (!settled_at_) {
    if (std::optional<std::string> saved = note_checkpoint(now, latest)) {
      p.lines.push_back(*saved);
    } else if (now - warned_at_ >= plan_.save_wait_s) {
      settled_at_ = now;
      p.lines.push_back("no new checkpoint after " + std::to_string(std::int64_t(std::lround(plan_.save_wait_s))) +
                        "s (SAVE_WAIT): requeueing anyway; the job resumes from " + resumes_from());
    }
  }
  p.end_attempt = settled_at_ && now - *settled_at_ >= plan_.end_grace_s;
  return p;
}

TimeLimitStop::Ending TimeLimitStop::finish(double now, const std::string& latest) {
  Ending e;
  if (!settled_at_) {
    if (std::optional<std::string> saved = note_checkpoint(now, latest))
      e.lines.push_back(*saved);
    else
      e.lines.push_back("the ranks ended without a new checkpoint (the signal came before they could save): "
                        "requeueing; the job resumes from " + resumes_from());
  }
  const std::optional<std::int64_t> step = checkpoint_step(latest);
  if (step && plan_.last_step > 0 && *step >= plan_.last_step) {
    e.requeue = false;
    e.lines.push_back("training reached step " + std::to_string(plan_.last_step) + ": done, not requeued");
    return e;
  }
  e.lines.push_back(format_rfc3339(std::int64_t(now)) + " requeueing job " + plan_.job_id);
  return e;
}

}  // namespace shardtrain::launch
