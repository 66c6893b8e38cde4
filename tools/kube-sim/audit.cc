#include "tools/kube-sim/audit.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "httplib.h"

namespace reverser::kubesim {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& s : j[key]) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

ApiOr<AuditLevel> ParseLevel(const std::string& s) {
  if (s == "None") return AuditLevel::kNone;
  if (s == "Metadata") return AuditLevel::kMetadata;
  if (s == "Request") return AuditLevel::kRequest;
  if (s == "RequestResponse") return AuditLevel::kRequestResponse;
  return BadRequest(absl::StrCat("unknown audit level \"", s, "\""));
}

// Resource names in policies may be "*", "group/*"-less plain names or "resource/subresource",
// "*/status", "resource/*".
bool ResourceMatches(const std::vector<std::string>& patterns, const std::string& resource,
                     const std::string& subresource) {
  if (patterns.empty()) return true;
  std::string full = subresource.empty() ? resource : absl::StrCat(resource, "/", subresource);
  for (const auto& p : patterns) {
    if (p == "*" || p == full) return true;
    if (!subresource.empty() && p == absl::StrCat("*/", subresource)) return true;
    if (!subresource.empty() && p == absl::StrCat(resource, "/*")) return true;
  }
  return false;
}

bool PathMatches(const std::vector<std::string>& patterns, const std::string& path) {
  for (const auto& p : patterns) {
    if (p == "*" || p == path) return true;
    if (absl::EndsWith(p, "*") && absl::StartsWith(path, p.substr(0, p.size() - 1))) return true;
  }
  return false;
}

}  // namespace

const char* AuditLevelName(AuditLevel level) {
  switch (level) {
    case AuditLevel::kNone:
      return "None";
    case AuditLevel::kMetadata:
      return "Metadata";
    case AuditLevel::kRequest:
      return "Request";
    case AuditLevel::kRequestResponse:
      return "RequestResponse";
  }
  return "None";
}

ApiOr<AuditPolicy> AuditPolicy::FromJson(const Json& policy) {
  if (!policy.is_object()) return BadRequest("audit policy must be an object");
  AuditPolicy p;
  p.omit_stages_ = Strings(policy, "omitStages");
  p.omit_managed_fields_ = policy.value("omitManagedFields", false);
  if (!policy.contains("rules") || !policy["rules"].is_array()) {
    return BadRequest("audit policy has no rules");
  }
  for (const auto& r : policy["rules"]) {
    if (!r.is_object()) return BadRequest("audit policy rule must be an object");
    Rule rule;
    ApiOr<AuditLevel> level = ParseLevel(r.value("level", ""));
    if (!level.ok()) return level.error();
    rule.level = *level;
    rule.users = Strings(r, "users");
    rule.user_groups = Strings(r, "userGroups");
    rule.verbs = Strings(r, "verbs");
    rule.namespaces = Strings(r, "namespaces");
    rule.non_resource_urls = Strings(r, "nonResourceURLs");
    if (r.contains("resources") && r["resources"].is_array()) {
      rule.has_resources = true;
      for (const auto& gr : r["resources"]) {
        if (!gr.is_object()) continue;
        rule.resources.push_back(
            {gr.value("group", ""), Strings(gr, "resources"), Strings(gr, "resourceNames")});
      }
    }
    if (r.contains("omitStages")) rule.omit_stages = Strings(r, "omitStages");
    if (r.contains("omitManagedFields") && r["omitManagedFields"].is_boolean()) {
      rule.omit_managed_fields = r["omitManagedFields"].get<bool>();
    }
    p.rules_.push_back(std::move(rule));
  }
  return p;
}

AuditPolicy AuditPolicy::AllAt(AuditLevel level) {
  AuditPolicy p;
  Rule r;
  r.level = level;
  p.rules_.push_back(r);
  return p;
}

AuditDecision AuditPolicy::Evaluate(const AuditRequestAttributes& a) const {
  for (const auto& r : rules_) {
    if (!r.users.empty() && !Contains(r.users, a.user)) continue;
    if (!r.user_groups.empty() &&
        std::none_of(a.groups.begin(), a.groups.end(),
                     [&](const std::string& g) { return Contains(r.user_groups, g); })) {
      continue;
    }
    if (!r.verbs.empty() && !Contains(r.verbs, a.verb)) continue;
    if (a.is_resource) {
      if (!r.non_resource_urls.empty() && !r.has_resources) continue;
      if (!r.namespaces.empty() && !Contains(r.namespaces, a.namespace_)) continue;
      if (r.has_resources) {
        bool any = false;
        for (const auto& gr : r.resources) {
          if (gr.group != a.api_group && gr.group != "*") continue;
          if (!ResourceMatches(gr.resources, a.resource, a.subresource)) continue;
          if (!gr.resource_names.empty() && !Contains(gr.resource_names, a.name)) continue;
          any = true;
          break;
        }
        if (!any) continue;
      }
    } else {
      if (r.has_resources || !r.namespaces.empty()) continue;
      if (!r.non_resource_urls.empty() && !PathMatches(r.non_resource_urls, a.path)) continue;
    }
    AuditDecision d;
    d.level = r.level;
    d.omit_stages = omit_stages_;
    if (r.omit_stages) {
      for (const auto& s : *r.omit_stages) {
        if (!Contains(d.omit_stages, s)) d.omit_stages.push_back(s);
      }
    }
    d.omit_managed_fields = r.omit_managed_fields.value_or(omit_managed_fields_);
    return d;
  }
  return {};
}

AuditWebhookBackend::AuditWebhookBackend(AuditWebhookOptions options)
    : options_(std::move(options)), thread_([this] { Run(); }) {}

AuditWebhookBackend::~AuditWebhookBackend() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AuditWebhookBackend::Process(Json event) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= 10000) {  // --audit-webhook-batch-buffer-size default
      ++stats_.events_dropped;
      return;
    }
    if (queue_.empty()) first_queued_ = absl::Now();
    queue_.push_back(std::move(event));
  }
  cv_.notify_all();
}

bool AuditWebhookBackend::WaitIdle(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::unique_lock lock(mu_);
  while (!queue_.empty() || in_flight_) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    cv_.wait_for(lock, absl::ToChronoMilliseconds(std::min(left, absl::Milliseconds(50))));
  }
  return true;
}

void AuditWebhookBackend::SetHeld(bool held) {
  {
    std::lock_guard lock(mu_);
    held_ = held;
  }
  cv_.notify_all();
}

AuditWebhookBackend::Stats AuditWebhookBackend::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.events_queued = static_cast<int64_t>(queue_.size());
  s.held = held_;
  return s;
}

bool AuditWebhookBackend::Post(const std::string& body) {
  // One keep-alive client for the backend's life, as kube-apiserver's Go client reuses its
  // connection: a new mutual-TLS handshake per batch would add tens of milliseconds.
  if (client_ == nullptr) {
    // Split "scheme://host:port/path".
    const std::string& url = options_.url;
    size_t scheme_end = url.find("://");
    size_t path_start = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
    std::string base = path_start == std::string::npos ? url : url.substr(0, path_start);
    path_ = path_start == std::string::npos ? "/" : url.substr(path_start);
    if (!options_.client_cert_file.empty()) {
      client_ = std::make_unique<httplib::Client>(base, options_.client_cert_file,
                                                  options_.client_key_file);
    } else {
      client_ = std::make_unique<httplib::Client>(base);
    }
    if (!client_->is_valid()) {
      client_.reset();
      return false;
    }
    if (!options_.ca_file.empty()) client_->set_ca_cert_path(options_.ca_file.c_str());
    client_->enable_server_certificate_verification(!options_.insecure_skip_verify);
    auto secs = absl::ToInt64Seconds(options_.request_timeout);
    client_->set_connection_timeout(secs, 0);
    client_->set_read_timeout(secs, 0);
    client_->set_write_timeout(secs, 0);
    client_->set_keep_alive(true);
    client_->set_tcp_nodelay(true);  // headers and body go out as separate writes
  }
  httplib::Headers headers = {
      {"User-Agent", "kube-apiserver/v1.34.0 (linux/amd64) kubernetes/kube-sim"}};
  if (!options_.bearer_token.empty()) {
    headers.emplace("Authorization", absl::StrCat("Bearer ", options_.bearer_token));
  }
  auto res = client_->Post(path_.c_str(), headers, body, "application/json");
  if (!res) client_.reset();  // a broken connection: reconnect on the next attempt
  return res && res->status >= 200 && res->status < 300;
}

void AuditWebhookBackend::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    // Wait for a full batch, the max-wait deadline of the oldest event, or shutdown; while
    // held, only for release or shutdown.
    while (!stopping_ && (held_ || queue_.empty() ||
                          (queue_.size() < options_.max_batch_size &&
                           absl::Now() < first_queued_ + options_.max_wait))) {
      if (queue_.empty() || held_) {
        cv_.wait(lock);
      } else {
        cv_.wait_for(lock,
                     absl::ToChronoMilliseconds(std::max(
                         first_queued_ + options_.max_wait - absl::Now(), absl::Milliseconds(1))));
      }
    }
    if (queue_.empty()) return;  // stopping with nothing left
    Json items = Json::array();
    while (!queue_.empty() && items.size() < options_.max_batch_size) {
      items.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    first_queued_ = queue_.empty() ? absl::InfiniteFuture() : absl::Now();
    in_flight_ = true;
    std::string body = Json{
        {"kind", "EventList"},
        {"apiVersion", "audit.k8s.io/v1"},
        {"metadata", Json::object()},
        {"items", items}}.dump();
    absl::Duration backoff = options_.initial_backoff;
    bool sent = false;
    for (int attempt = 0; attempt < options_.backoff_steps; ++attempt) {
      lock.unlock();
      sent = Post(body);
      lock.lock();
      if (sent || stopping_) break;
      ++stats_.failed_attempts;
      // Back off, but wake early on shutdown.
      cv_.wait_for(lock, absl::ToChronoMilliseconds(backoff), [this] { return stopping_; });
      backoff = backoff * options_.backoff_factor;
    }
    if (sent) {
      ++stats_.batches_sent;
      stats_.events_sent += items.size();
    } else {
      stats_.events_dropped += items.size();
    }
    in_flight_ = false;
    cv_.notify_all();
  }
}

}  // namespace reverser::kubesim
