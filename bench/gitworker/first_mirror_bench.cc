// First mirror of N objects into an empty remote through the gitworker's branch worker, against
// `git fast-import` writing the same tree into an empty repository (issue #7: at most 2×).
//
//   bazel run -c opt //bench/gitworker:first_mirror_bench -- --objects=100000 --runs=3
//
// Both sides are timed the same way: as a whole child process, from fork to wait4, each reading
// its input from a file prepared before any clock starts, and each run --runs times, interleaved
// (gitworker, fast-import, gitworker, fast-import, ...) on fresh repositories. wait4 gives each
// side's own peak RSS; a sampler thread follows each child's VmRSS for the RSS-over-time plot.
//  - gitworker: this binary again with --side=gitworker. It parses the resync snapshot (the
//    ClusterSnapshot a splicer would send, serialized to a file), then runs BranchWorker::Add
//    (render + commit) and PushIfDue (push to the bare remote), exactly as the service does.
//  - fast-import: `git fast-import` reading a stream of the same files (inline blobs, one
//    commit) from a file on stdin.
// The trees of every run must be equal and the mirrored remote must pass `git fsck`. A further
// child (--side=phases) repeats the gitworker's steps one by one on a fresh remote to show where
// the time goes; it does not count towards the ratio.

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/common/bench_result.h"
#include "libs/git/repository.h"
#include "services/gitworker/branch_worker.h"
#include "services/gitworker/identity_index.h"
#include "services/gitworker/target_writer.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

ABSL_FLAG(int, objects, 100000, "ConfigMaps in the first mirror");
ABSL_FLAG(int64_t, pack_threshold, static_cast<int64_t>(reverser::git::kDefaultPackThreshold),
          "files per commit from which objects are written as one pack (-1: never, all loose)");
ABSL_FLAG(int, runs, 3, "runs of each side, interleaved; min/median/max are reported");
ABSL_FLAG(bool, phases, true, "also time each step on its own (a third child process)");
ABSL_FLAG(std::string, transport, "path",
          "how the gitworker reaches the remote: path (a local path) or daemon (git:// through "
          "`git daemon`, the smart protocol a network remote speaks)");
// Internal: which side this process runs, and where.
ABSL_FLAG(std::string, side, "", "internal: gitworker | phases");
ABSL_FLAG(std::string, remote, "", "internal: the bare remote");
ABSL_FLAG(std::string, work_dir, "", "internal: the gitworker's work dir");
ABSL_FLAG(std::string, report, "", "internal: where the child writes its figures");
ABSL_FLAG(std::string, input, "", "internal: the serialized ClusterSnapshot the child reads");

namespace reverser::bench {
namespace {

using namespace ::reverser::gitworker::testsupport;  // NOLINT

using Figures = std::map<std::string, double>;

size_t PackThreshold() {
  const int64_t threshold = absl::GetFlag(FLAGS_pack_threshold);
  return threshold < 0 ? SIZE_MAX : static_cast<size_t>(threshold);
}

// kB of a /proc/self/status field (VmRSS, VmHWM).
double StatusKb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream in(line.substr(field.size() + 1));
      double kb = 0;
      in >> kb;
      return kb;
    }
  }
  return 0;
}

void WriteFigures(const Figures& figures) {
  std::ofstream out(absl::GetFlag(FLAGS_report));
  for (const auto& [name, value] : figures) out << name << " " << value << "\n";
}

Figures ReadFigures(const std::string& path) {
  Figures figures;
  std::ifstream in(path);
  std::string name;
  double value;
  while (in >> name >> value) figures[name] = value;
  return figures;
}

// The desired set: ConfigMaps spread over 50 namespaces, as the old in-test bench had it.
reverser::v1::ClusterSnapshot MakeSnapshot(const reverser::v1::GitTargetConfig& config, int n) {
  std::vector<reverser::v1::ObjectBody> objects;
  objects.reserve(n);
  for (int i = 0; i < n; ++i) {
    objects.push_back(Object(ConfigMaps(), absl::StrCat("ns", i % 50), absl::StrCat("cm", i),
                             absl::StrCat("value-", i)));
  }
  return Snapshot(config, ConfigMaps(), std::move(objects), 1);
}

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

// The serialized resync snapshot at --input (written by the parent before any clock starts).
bool ReadSnapshot(reverser::v1::ClusterSnapshot& snapshot) {
  std::ifstream in(absl::GetFlag(FLAGS_input), std::ios::binary);
  return in && snapshot.ParseFromIstream(&in);
}

// --side=gitworker: the measured run, exactly as the service does it.
int RunGitworkerSide() {
  const std::string remote = absl::GetFlag(FLAGS_remote);
  auto config = Config(remote, 0);
  auto settings = gitworker::SettingsFromConfig(config);
  if (!settings.ok()) return 2;
  Figures figures;
  absl::Time start = absl::Now();
  gitworker::WorkItem item;
  item.kind = gitworker::WorkItem::Kind::kResync;
  item.settings = *settings;
  if (!ReadSnapshot(item.resync)) return 2;
  auto sink = std::make_shared<RecordingSink>();
  item.covers.push_back(gitworker::CoverageOf(item, sink));
  figures["inputs_s"] = Seconds(start);
  figures["inputs_rss_kb"] = StatusKb("VmRSS");

  runtime::MetricsRegistry metrics;
  gitworker::BranchWorkerOptions options;
  options.key = {"team", "repo", "main"};
  options.remote_url = remote;
  options.work_dir = absl::GetFlag(FLAGS_work_dir);
  options.push_cooldown = absl::ZeroDuration();
  options.metrics = &metrics;
  options.pack_threshold = PackThreshold();
  gitworker::BranchWorker worker(options);
  start = absl::Now();
  worker.Add(std::move(item));
  figures["commit_s"] = Seconds(start);
  figures["commit_hwm_kb"] = StatusKb("VmHWM");
  const absl::Time push_start = absl::Now();
  worker.PushIfDue();
  figures["push_s"] = Seconds(push_start);
  figures["total_s"] = Seconds(start);
  if (sink->AckedRv(ConfigMaps()) != 1u) {
    std::cerr << "the resync was not acked: " << worker.Status().last_error() << "\n";
    return 1;
  }
  WriteFigures(figures);
  return 0;
}

// --side=phases: the same work step by step, each timed.
int RunPhasesSide() {
  const std::string remote = absl::GetFlag(FLAGS_remote);
  auto config = Config(remote, 0);
  auto settings = gitworker::SettingsFromConfig(config);
  if (!settings.ok()) return 2;
  Figures figures;
  reverser::v1::ClusterSnapshot snapshot;
  if (!ReadSnapshot(snapshot)) return 2;
  figures["inputs_rss_kb"] = StatusKb("VmRSS");

  absl::Time start = absl::Now();
  gitworker::PreparedResync prepared = gitworker::PrepareResync(**settings, std::move(snapshot));
  figures["render_s"] = Seconds(start);
  figures["render_rss_kb"] = StatusKb("VmRSS");

  git::RepositoryOptions repo_options;
  repo_options.local_path = absl::GetFlag(FLAGS_work_dir) + "/clone";
  repo_options.remote_url = remote;
  repo_options.pack_threshold = PackThreshold();
  auto repo = git::Repository::Open(repo_options);
  if (!repo.ok()) return 2;
  start = absl::Now();
  if (!(*repo)->Fetch().ok()) return 2;
  figures["fetch_s"] = Seconds(start);

  start = absl::Now();
  gitworker::IdentityIndex index;
  gitworker::ResyncChanges changes = gitworker::PlanResyncChanges(index, prepared);
  for (auto& [path, content] : gitworker::BootstrapFiles(**settings)) {
    changes.changes[path] = content;
  }
  figures["plan_s"] = Seconds(start);
  figures["plan_rss_kb"] = StatusKb("VmRSS");

  start = absl::Now();
  git::Identity who{"bench", "bench@example.com", absl::FromUnixSeconds(1700000000), 0};
  auto commit = (*repo)->CommitOnBranch("main", changes.changes, {who, who, "first mirror"});
  figures["commit_s"] = Seconds(start);
  figures["commit_hwm_kb"] = StatusKb("VmHWM");
  if (!commit.ok() || !commit->has_value()) {
    std::cerr << "commit failed: " << commit.status() << "\n";
    return 1;
  }

  start = absl::Now();
  auto pushed = (*repo)->Push("main", **commit, std::nullopt);
  figures["push_s"] = Seconds(start);
  figures["push_hwm_kb"] = StatusKb("VmHWM");
  if (!pushed.ok() || pushed->outcome != git::PushOutcome::kPushed) {
    std::cerr << "push failed: " << pushed.status() << "\n";
    return 1;
  }
  WriteFigures(figures);
  return 0;
}

struct ChildResult {
  int exit_code = -1;
  double seconds = 0;
  double peak_rss_kb = 0;
  std::vector<std::pair<double, double>> rss_kb;  // (seconds since fork, VmRSS kB), sampled
};

// VmRSS of process `pid` in kB (0 once it has exited).
double ProcessRssKb(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr);
  }
  return 0;
}

// Runs argv with stdin from `stdin_path` (empty: /dev/null), timed from just before fork to the
// return of wait4 (which reports the child's own peak RSS). Both sides of the bench go through
// here, so both are timed as whole processes. A sampler thread reads the child's VmRSS every
// 20 ms meanwhile (it only reads /proc; the child is not slowed beyond that).
ChildResult RunChild(const std::vector<std::string>& argv, const std::string& stdin_path = "") {
  ChildResult result;
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const absl::Time start = absl::Now();
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    if (in < 0 || dup2(in, 0) < 0) _exit(127);
    int out = open("/dev/null", O_WRONLY);
    if (out >= 0) dup2(out, 1);
    execvp(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) return result;
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) {
      const double kb = ProcessRssKb(pid);
      if (kb > 0) result.rss_kb.emplace_back(Seconds(start), kb);
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  int status = 0;
  rusage usage{};
  const pid_t waited = wait4(pid, &status, 0, &usage);
  const double seconds = Seconds(start);
  done = true;
  sampler.join();
  if (waited == pid) {
    result.seconds = seconds;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.peak_rss_kb = static_cast<double>(usage.ru_maxrss);
  }
  return result;
}

std::string SelfPath() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
}

// The fast-import stream for the files of `repo`'s main branch, written to `path`.
bool WriteFastImportStream(const std::string& repo, const std::string& path) {
  auto listing = testing::Git(repo, {"ls-tree", "-r", "main"});
  if (!listing.ok()) return false;
  std::vector<std::pair<std::string, std::string>> files;  // path, blob id
  std::string request;
  for (absl::string_view line : absl::StrSplit(*listing, '\n', absl::SkipEmpty())) {
    // "<mode> blob <sha>\t<path>"
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    std::vector<absl::string_view> meta = absl::StrSplit(parts[0], ' ');
    files.emplace_back(std::string(parts[1]), std::string(meta[2]));
    absl::StrAppend(&request, meta[2], "\n");
  }
  auto batch = testing::RunCommand({"git", "-C", repo, "cat-file", "--batch"}, request);
  if (!batch.ok() || batch->exit_code != 0) return false;
  std::ofstream out(path, std::ios::binary);
  out << "commit refs/heads/main\ncommitter A <a@b> 1700000000 +0000\ndata 2\nm\n";
  size_t at = 0;
  for (const auto& [file, id] : files) {
    // "<sha> blob <size>\n<content>\n"
    const size_t header_end = batch->out.find('\n', at);
    size_t size = 0;
    if (header_end == std::string::npos ||
        !absl::SimpleAtoi(batch->out.substr(batch->out.rfind(' ', header_end) + 1,
                                            header_end - batch->out.rfind(' ', header_end) - 1),
                          &size)) {
      return false;
    }
    out << "M 100644 inline " << file << "\ndata " << size << "\n";
    out.write(batch->out.data() + header_end + 1, static_cast<std::streamsize>(size));
    out << "\n";
    at = header_end + 1 + size + 1;
  }
  return static_cast<bool>(out);
}

std::string Mib(double kb) { return absl::StrFormat("%.0f MiB", kb / 1024); }

std::string Median3(const std::vector<double>& v, const char* format) {
  const Stats s = StatsOf(v);
  return absl::StrCat(absl::StrFormat(format, s.median), " (", absl::StrFormat(format, s.min), "–",
                      absl::StrFormat(format, s.max), ")");
}

nlohmann::json Timeline(const ChildResult& child) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& [t, kb] : child.rss_kb) points.push_back({t, kb / 1024});
  points.push_back({child.seconds, 0});  // exited
  return points;
}

int RunBench() {
  const int n = absl::GetFlag(FLAGS_objects);
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  testing::ScopedTempDir dir("first-mirror-bench");
  const std::string self = SelfPath();
  const std::string threshold =
      absl::StrCat("--pack_threshold=", absl::GetFlag(FLAGS_pack_threshold));

  // The gitworker's input, as a splicer would send it, serialized once before any clock starts
  // (fast-import's stream is likewise a prepared file); the parent keeps nothing of it.
  const std::string input = dir.path() + "/snapshot.pb";
  {
    reverser::v1::ClusterSnapshot snapshot = MakeSnapshot(Config("unused", 0), n);
    std::ofstream out(input, std::ios::binary);
    if (!snapshot.SerializeToOstream(&out)) {
      std::cerr << "could not write the snapshot\n";
      return 1;
    }
  }

  // The URL the gitworker pushes to; the checks below read the bare repositories directly.
  const std::string transport = absl::GetFlag(FLAGS_transport);
  std::optional<testing::ChildProcess> daemon;
  std::optional<int> daemon_port;
  auto url_of = [&](const std::string& name) {
    return daemon_port.has_value() ? absl::StrCat("git://127.0.0.1:", *daemon_port, "/", name)
                                   : absl::StrCat(dir.path(), "/", name);
  };
  if (transport == "daemon") {
    if (!testing::CreateBareRemote(dir.path(), "probe.git", "main", /*seed=*/false).ok()) return 1;
    auto port = testing::StartGitDaemon(dir.path(), "probe.git", &daemon);
    if (!port.ok()) {
      std::cerr << port.status() << "\n";
      return 1;
    }
    daemon_port = *port;
  } else if (transport != "path") {
    std::cerr << "--transport must be path or daemon\n";
    return 1;
  }

  const std::string stream = dir.path() + "/stream.fi";
  std::vector<double> ours_s, theirs_s, ours_rss, theirs_rss, inputs_rss, inputs_s, commit_s,
      push_s, inprocess_s;
  ChildResult last_ours, last_theirs;
  for (int r = 0; r < runs; ++r) {
    const std::string name = absl::StrCat("remote-", r, ".git");
    auto remote = testing::CreateBareRemote(dir.path(), name, "main", /*seed=*/false);
    if (!remote.ok()) {
      std::cerr << remote.status() << "\n";
      return 1;
    }
    const std::string report = absl::StrCat(dir.path(), "/gitworker-", r, ".txt");
    ChildResult ours =
        RunChild({self, "--side=gitworker", "--remote=" + url_of(name),
                  absl::StrCat("--work_dir=", dir.path(), "/work-", r), "--report=" + report,
                  "--input=" + input, absl::StrCat("--objects=", n), threshold});
    if (ours.exit_code != 0) {
      std::cerr << "gitworker side failed (exit " << ours.exit_code << ")\n";
      return 1;
    }
    Figures figures = ReadFigures(report);
    // The fast-import stream holds the first mirror's files (built outside both clocks).
    if (r == 0 && !WriteFastImportStream(*remote, stream)) {
      std::cerr << "could not build the fast-import stream\n";
      return 1;
    }
    auto target =
        testing::CreateBareRemote(dir.path(), absl::StrCat("import-", r, ".git"), "main", false);
    if (!target.ok()) return 1;
    ChildResult theirs = RunChild({"git", "-C", *target, "fast-import", "--quiet"}, stream);
    if (theirs.exit_code != 0) {
      std::cerr << "git fast-import failed (exit " << theirs.exit_code << ")\n";
      return 1;
    }
    auto ours_tree = testing::Git(*remote, {"rev-parse", "main^{tree}"});
    auto their_tree = testing::Git(*target, {"rev-parse", "main^{tree}"});
    if (!ours_tree.ok() || !their_tree.ok() || *ours_tree != *their_tree) {
      std::cerr << "the trees differ (run " << r << ")\n";
      return 1;
    }
    if (r == 0 || r == runs - 1) {
      auto fsck = testing::Git(*remote, {"fsck", "--no-dangling"});
      if (!fsck.ok()) {
        std::cerr << "git fsck of the mirrored remote failed: " << fsck.status() << "\n";
        return 1;
      }
    }
    ours_s.push_back(ours.seconds);
    theirs_s.push_back(theirs.seconds);
    ours_rss.push_back(ours.peak_rss_kb / 1024);
    theirs_rss.push_back(theirs.peak_rss_kb / 1024);
    inputs_rss.push_back(figures["inputs_rss_kb"] / 1024);
    inputs_s.push_back(figures["inputs_s"]);
    commit_s.push_back(figures["commit_s"]);
    push_s.push_back(figures["push_s"]);
    inprocess_s.push_back(figures["total_s"]);
    std::cout << absl::StrFormat(
        "  run %d: gitworker %.2f s, %.0f MiB; git fast-import %.2f s, %.0f MiB\n", r + 1,
        ours.seconds, ours.peak_rss_kb / 1024, theirs.seconds, theirs.peak_rss_kb / 1024);
    last_ours = std::move(ours);
    last_theirs = std::move(theirs);
    testing::RemoveTree(*remote);
    testing::RemoveTree(*target);
    testing::RemoveTree(absl::StrCat(dir.path(), "/work-", r));
  }

  std::vector<double> added_rss;
  for (size_t i = 0; i < ours_rss.size(); ++i) added_rss.push_back(ours_rss[i] - inputs_rss[i]);
  const double time_ratio = Median(ours_s) / Median(theirs_s);
  const double rss_ratio = Median(ours_rss) / Median(theirs_rss);
  std::cout << absl::StrFormat(
      "first mirror of %d objects (%d files), pack threshold %s, remote via %s; %d interleaved "
      "runs per side, each a whole process timed fork → wait4, median (min–max)\n"
      "  gitworker:       %s s; peak RSS %s MiB (its input alone %s MiB)\n"
      "    in-process steps: read input %s s, render+commit %s s, push %s s\n"
      "  git fast-import: %s s; peak RSS %s MiB\n"
      "  ratio of medians: time %.2fx, peak RSS %.2fx (goal ≤ 2× each: time %s, RSS %s); "
      "%.2fx counting only what the mirror adds to the input\n",
      n, n + 2,
      absl::GetFlag(FLAGS_pack_threshold) < 0
          ? std::string("off (loose objects)")
          : absl::StrCat(absl::GetFlag(FLAGS_pack_threshold), " files"),
      daemon_port.has_value() ? "git daemon (smart protocol)" : "a local path", runs,
      Median3(ours_s, "%.2f"), Median3(ours_rss, "%.0f"), Median3(inputs_rss, "%.0f"),
      Median3(inputs_s, "%.2f"), Median3(commit_s, "%.2f"), Median3(push_s, "%.2f"),
      Median3(theirs_s, "%.2f"), Median3(theirs_rss, "%.0f"), time_ratio, rss_ratio,
      time_ratio <= 2 ? "met" : "not met", rss_ratio <= 2 ? "met" : "not met",
      Median(added_rss) / Median(theirs_rss));

  const std::string how = absl::StrCat(
      "both whole child processes, fork to wait4, each reading a prepared input file; ", runs,
      " runs each, interleaved; peak RSS from wait4 rusage");
  const std::string suffix = daemon_port.has_value() ? "_daemon" : "";
  const std::string via = daemon_port.has_value() ? ", pushed over git://" : ", local-path remote";
  const Series anchor_time{"git_fast_import_s", "git fast-import of the same files, one commit",
                           theirs_s};
  const Series anchor_rss{"git_fast_import_rss_mib", "git fast-import's peak RSS", theirs_rss};
  EmitFigure({.bench = "first_mirror",
              .figure = "time" + suffix,
              .label = absl::StrCat("first mirror of ", n, " ConfigMaps into an empty remote", via),
              .unit = "s",
              .better = "lower",
              .samples = ours_s,
              .anchor = anchor_time,
              .goal = Goal{"≤ 2× git fast-import (issue #7)", "ratio", "<=", 2.0},
              .timing = how});
  EmitFigure({.bench = "first_mirror",
              .figure = "peak_rss" + suffix,
              .label = absl::StrCat("peak RSS of that first mirror", via),
              .unit = "MiB",
              .better = "lower",
              .samples = ours_rss,
              .anchor = anchor_rss,
              .goal = Goal{"≤ 2× git fast-import's peak RSS", "ratio", "<=", 2.0},
              .timing = how});
  EmitFigure({.bench = "first_mirror",
              .figure = "peak_rss_added" + suffix,
              .label = "peak RSS minus the parsed input (what the mirror adds)",
              .unit = "MiB",
              .better = "lower",
              .samples = added_rss,
              .anchor = anchor_rss,
              .timing = how,
              .context = true});
  EmitFigure({.bench = "first_mirror",
              .figure = "in_process_s" + suffix,
              .label = "render+commit+push timed inside the gitworker process (input parsed)",
              .unit = "s",
              .better = "lower",
              .samples = inprocess_s,
              .timing = "inside the process, after its input was parsed: not comparable to "
                        "the anchor, so no ratio",
              .context = true});
  EmitSeries("first_mirror", "rss_timeline" + suffix,
             {{"objects", n},
              {"gitworker", Timeline(last_ours)},
              {"git_fast_import", Timeline(last_theirs)}});

  if (absl::GetFlag(FLAGS_phases)) {
    auto fresh = testing::CreateBareRemote(dir.path(), "phases.git", "main", /*seed=*/false);
    if (!fresh.ok()) return 1;
    const std::string report = dir.path() + "/phases.txt";
    ChildResult phases = RunChild({self, "--side=phases", "--remote=" + url_of("phases.git"),
                                   "--work_dir=" + dir.path() + "/p", "--report=" + report,
                                   "--input=" + input, absl::StrCat("--objects=", n), threshold});
    if (phases.exit_code != 0) {
      std::cerr << "phases side failed (exit " << phases.exit_code << ")\n";
      return 1;
    }
    Figures steps = ReadFigures(report);
    std::cout << absl::StrFormat(
        "  steps (separate run): render YAML %.2f s, plan %.2f s, blobs+trees+commit %.2f s, "
        "push %.2f s\n"
        "  RSS by step: inputs %s, after render %s, after plan %s, peak through commit %s, "
        "through push %s\n",
        steps["render_s"], steps["plan_s"], steps["commit_s"], steps["push_s"],
        Mib(steps["inputs_rss_kb"]), Mib(steps["render_rss_kb"]), Mib(steps["plan_rss_kb"]),
        Mib(steps["commit_hwm_kb"]), Mib(steps["push_hwm_kb"]));
  }
  return 0;
}

}  // namespace
}  // namespace reverser::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string side = absl::GetFlag(FLAGS_side);
  if (side == "gitworker") return reverser::bench::RunGitworkerSide();
  if (side == "phases") return reverser::bench::RunPhasesSide();
  return reverser::bench::RunBench();
}
