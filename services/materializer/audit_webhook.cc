#include "services/materializer/audit_webhook.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "libs/runtime/log.h"
#include "nlohmann/json.hpp"

namespace reverser::materializer {
namespace {

constexpr char kPath[] = "/audit-webhook";
// Batches one connection may carry before the server closes it.
constexpr size_t kRequestsPerConnection = 10000;

std::string StatusJson(int code, absl::string_view reason, absl::string_view message) {
  nlohmann::json status = {{"kind", "Status"},        {"apiVersion", "v1"},
                           {"metadata", nlohmann::json::object()},
                           {"status", code < 300 ? "Success" : "Failure"},
                           {"reason", std::string(reason)},
                           {"message", std::string(message)},
                           {"code", code}};
  return status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

AuditIntake::AuditIntake(FactSink* sink, runtime::MetricsRegistry* metrics, StreamSink* streams)
    : sink_(sink), metrics_(metrics), streams_(streams) {}

AuditResponse AuditIntake::Handle(const std::string& method, const std::string& path,
                                  std::string body) {
  auto count_list = [&](absl::string_view outcome) {
    metrics_
        ->GetCounter("gitopsreverser_audit_eventlists_total", "Audit EventLists received.",
                     {{"outcome", std::string(outcome)}})
        .Increment();
  };
  if (path != kPath) {
    count_list("decode_error");
    return {400, StatusJson(400, "BadRequest",
                            "the audit webhook path is exactly /audit-webhook and must not "
                            "include a cluster ID or trailing segment")};
  }
  if (method != "POST") {
    return {405, StatusJson(405, "MethodNotAllowed", "the audit webhook accepts POST only")};
  }
  absl::Time start = absl::Now();
  auto items = audit::ParseEventList(std::move(body));
  if (!items.ok()) {
    count_list("decode_error");
    runtime::LogWarning("audit eventlist rejected", {{"error", std::string(items.status().message())}});
    return {400, StatusJson(400, "BadRequest", items.status().message())};
  }
  if (items->empty()) {
    count_list("empty");
    return {200, StatusJson(200, "", "no events")};
  }

  std::vector<redisstore::AuthorFact> facts;
  facts.reserve(items->size());
  std::vector<const audit::AuditEvent*> accepted;
  accepted.reserve(items->size());
  // Events counted per label set, then one counter update per set: the registry's lookup (a
  // lock and a map of label strings) once per request, not once per event.
  struct Series {
    audit::Outcome outcome;
    const audit::AuditEvent* example;  // its objectRef and verb are the other labels
    int events;
  };
  std::vector<Series> series;
  auto same_labels = [](const audit::AuditEvent& a, const audit::AuditEvent& b) {
    return a.verb == b.verb && a.object_ref.resource == b.object_ref.resource &&
           a.object_ref.api_group == b.object_ref.api_group &&
           a.object_ref.api_version == b.object_ref.api_version;
  };
  for (const audit::AuditEvent& event : *items) {
    audit::Outcome outcome = audit::Classify(event);
    auto it = std::find_if(series.begin(), series.end(), [&](const Series& s) {
      return s.outcome == outcome && same_labels(*s.example, event);
    });
    if (it == series.end()) {
      series.push_back({outcome, &event, 1});
    } else {
      ++it->events;
    }
    if (outcome != audit::Outcome::kQueued) continue;
    accepted.push_back(&event);
    audit::AppendFacts(event, facts);
  }
  absl::Status written = facts.empty() ? absl::OkStatus() : sink_->Write(facts);
  if (written.ok() && streams_ != nullptr && !accepted.empty()) {
    written = streams_->Append(accepted);
  }
  for (const Series& s : series) {
    std::string label(audit::OutcomeLabel(s.outcome));
    std::string category(audit::OutcomeCategory(s.outcome));
    if (s.outcome == audit::Outcome::kQueued && !written.ok()) {
      label = "write_error";
      category = "error";
    }
    const audit::ObjectReference& ref = s.example->object_ref;
    metrics_
        ->GetCounter("gitopsreverser_audit_events_total", "Audit events by outcome.",
                     {{"outcome", label},
                      {"category", category},
                      {"group", std::string(ref.api_group)},
                      {"version", std::string(ref.api_version)},
                      {"resource", std::string(ref.resource)},
                      {"verb", std::string(s.example->verb)}})
        .Increment(s.events);
  }
  metrics_
      ->GetHistogram("gitopsreverser_audit_eventlist_duration_seconds",
                     "Time to process one audit EventList.", {},
                     {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})
      .Observe(absl::ToDoubleSeconds(absl::Now() - start));
  if (!written.ok()) {
    count_list("process_error");
    runtime::LogError("audit events not stored; answering 500 so the API server retries",
                      {{"error", written.ToString()}, {"facts", static_cast<long long>(facts.size())}});
    return {500, StatusJson(500, "InternalError", "audit events could not be stored")};
  }
  count_list("processed");
  size_t expanded = 0;
  for (const auto& f : facts) expanded += f.verb == "deletecollection" ? 1 : 0;
  metrics_
      ->GetCounter("gitopsreverser_attribution_fact_events_total", "Author fact operations.",
                   {{"op", "written"}})
      .Increment(static_cast<double>(facts.size() - expanded));
  if (expanded > 0) {
    metrics_
        ->GetCounter("gitopsreverser_attribution_fact_events_total", "Author fact operations.",
                     {{"op", "deletecollection_expanded"}})
        .Increment(static_cast<double>(expanded));
  }
  return {200, StatusJson(200, "", absl::StrCat(facts.size(), " fact(s) recorded"))};
}

AuditWebhookServer::AuditWebhookServer(AuditWebhookOptions options, AuditIntake* intake)
    : options_(std::move(options)), intake_(intake) {}

absl::StatusOr<int> AuditWebhookServer::Start() {
  if (!options_.insecure) {
    if (options_.tls.cert_file.empty() || options_.tls.key_file.empty()) {
      return absl::InvalidArgumentError(
          "the audit webhook needs --audit_tls_cert and --audit_tls_key (or --audit_insecure "
          "for local development)");
    }
    if (options_.tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "the audit webhook requires client certificates: set --audit_client_ca (or "
          "--audit_insecure for local development)");
    }
  }
  server_ = std::make_unique<runtime::HttpServer>(options_.insecure ? nullptr : &options_.tls);
  if (!server_->valid()) {
    return absl::InvalidArgumentError(
        "audit webhook TLS material could not be loaded (certificate, key or client CA)");
  }
  const size_t limit = options_.max_body_bytes;
  auto handler = [this, limit](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& reader) {
    std::string body;
    // Room for the whole body and the decoder's padding up front: no regrowth while reading,
    // and the decoder works on it in place.
    size_t announced = 0;
    if (absl::SimpleAtoi(req.get_header_value("Content-Length"), &announced) &&
        announced <= limit) {
      body.reserve(announced + audit::kBodyPadding);
    }
    bool too_large = false;
    reader([&](const char* data, size_t length) {
      if (body.size() + length > limit) {
        too_large = true;
        return false;  // stop reading; the connection is closed after the answer
      }
      body.append(data, length);
      return true;
    });
    AuditResponse out;
    if (too_large) {
      out = {400, StatusJson(400, "BadRequest",
                             absl::StrCat("request body exceeds ", limit, " bytes"))};
    } else {
      out = intake_->Handle(req.method, req.path, std::move(body));
    }
    res.status = out.status;
    res.set_content(out.body, "application/json");
  };
  auto& routes = server_->routes();
  // Everything under the path is routed here so wrong paths get the reference's 400 answer.
  routes.Post("/audit-webhook.*", handler);
  routes.Get("/audit-webhook.*", [this](const httplib::Request& req, httplib::Response& res) {
    AuditResponse out = intake_->Handle(req.method, req.path, "");
    res.status = out.status;
    res.set_content(out.body, "application/json");
  });
  // httplib's own limit is a backstop above ours (it answers 413 and closes).
  routes.set_payload_max_length(limit * 2 + 1024);
  // httplib closes a keep-alive connection after 5 requests by default, so the API server paid
  // a full mTLS handshake every 5 batches. Idle connections still close after the keep-alive
  // timeout, which frees their worker thread.
  routes.set_keep_alive_max_count(kRequestsPerConnection);
  return server_->Start(options_.listen_address, options_.port);
}

void AuditWebhookServer::Stop() {
  if (server_) server_->Stop();
}

}  // namespace reverser::materializer
