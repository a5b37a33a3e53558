#include "shardtrain/slurm/accounting.hpp"

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <regex>
#include <sstream>

#include "command.hpp"

namespace shardtrain::slurm {
namespace {

using detail::Answer;
using detail::run;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

double to_double(const std::string& s) {
  try {
    return s.empty() ? 0 : std::stod(s);
  } catch (const std::exception&) {
    return 0;
  }
}

// A Slurm command's stdout; nothing when it is missing or fails (the cluster keeps no accounting).
std::optional<std::string> slurm_output(const std::vector<std::string>& argv) {
  const Answer a = run(argv, /*stderr_too=*/false);
  if (!a.ok()) return std::nullopt;
  return a.out;
}

}  // namespace

std::optional<double> JobRun::queue_wait_s() const {
  if (start && submit) return *start - *submit;
  return std::nullopt;
}
std::optional<double> JobRun::resource_wait_s() const {
  if (start && eligible) return *start - *eligible;
  return std::nullopt;
}

std::optional<double> parse_time(const std::string& text) {
  if (text.empty() || text == "Unknown" || text == "None" || text == "N/A") return std::nullopt;
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return std::nullopt;
  tm.tm_isdst = -1;
  return double(std::mktime(&tm));
}

double parse_duration_s(const std::string& text) {
  double days = 0;
  std::string rest = text;
  if (const auto dash = text.find('-'); dash != std::string::npos) {
    days = to_double(text.substr(0, dash));
    rest = text.substr(dash + 1);
  }
  double total = 0;
  for (const auto& part : split(rest, ':')) total = total * 60 + to_double(part);
  return days * 86400 + total;
}

std::map<std::string, std::vector<JobRun>> parse_sacct(const std::string& text) {
  std::map<std::string, std::vector<JobRun>> runs;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() < 8) continue;
    JobRun r;
    r.state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 0": the state alone
    r.submit = parse_time(f[2]);
    r.eligible = parse_time(f[3]);
    r.start = parse_time(f[4]);
    r.end = parse_time(f[5]);
    r.run_s = to_double(f[6]);
    r.cpus = int(to_double(f[7]));
    runs[f[0]].push_back(r);
  }
  return runs;
}

std::optional<JobRun> parse_scontrol_job(const std::string& text) {
  static const std::regex kv_re(R"((\w+)=(\S*))");
  std::map<std::string, std::string> kv;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kv_re); it != std::sregex_iterator(); ++it)
    kv[(*it)[1]] = (*it)[2];  // a repeated key: the last one
  if (kv.empty()) return std::nullopt;
  auto get = [&](const char* k) { return kv.count(k) ? kv[k] : std::string(); };
  JobRun r;
  r.state = get("JobState");
  r.submit = parse_time(get("SubmitTime"));
  r.eligible = parse_time(get("EligibleTime"));
  r.run_s = parse_duration_s(get("RunTime").empty() ? "0:0:0" : get("RunTime"));
  const bool ran = r.run_s > 0 || r.state == "RUNNING" || r.state == "COMPLETED" || r.state == "FAILED" ||
                   r.state == "TIMEOUT";
  if (ran) r.start = parse_time(get("StartTime"));
  r.end = parse_time(get("EndTime"));
  r.cpus = int(to_double(get("NumCPUs")));
  r.restarts = int(to_double(get("Restarts")));
  r.reason = get("Reason");
  return r;
}

bool scontrol_job_has_ended(const std::string& line) {
  static const std::regex state("JobState=([A-Z_]+)");
  std::smatch m;
  if (!std::regex_search(line, m, state)) return true;
  static const std::vector<std::string> ended = {"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                                 "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"};
  return std::find(ended.begin(), ended.end(), m[1].str()) != ended.end();
}

bool job_has_ended(const std::string& job_id) {
  const std::optional<std::string> out = slurm_output({"scontrol", "-o", "show", "job", job_id});
  return !out || scontrol_job_has_ended(*out);
}

JobAccounting account_jobs(const std::vector<std::string>& job_ids) {
  JobAccounting a;
  if (job_ids.empty()) return a;
  std::string ids;
  for (const auto& job : job_ids) ids += (ids.empty() ? "" : ",") + job;
  const std::optional<std::string> sacct = slurm_output(
      {"sacct", "-n", "-P", "-X", "-D", "-j", ids, "-o", "JobID,State,Submit,Eligible,Start,End,ElapsedRaw,AllocCPUS"});
  if (sacct) a.runs = parse_sacct(*sacct);
  a.source = a.runs.empty() ? "scontrol show job" : "sacct";
  for (const auto& job : job_ids)  // what sacct does not know (yet), scontrol may
    if (!a.runs.count(job))
      if (const auto out = slurm_output({"scontrol", "-o", "show", "job", job}))
        if (auto r = parse_scontrol_job(*out)) a.runs[job].push_back(*r);
  return a;
}

}  // namespace shardtrain::slurm
