#include "services/materializer/audit_webhook.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "libs/runtime/log.h"
#include "libs/runtime/peer_names.h"
#include "nlohmann/json.hpp"

namespace reverser::materializer {
namespace {

constexpr char kPath[] = "/audit-webhook";
// Batches one connection may carry before the server closes it.
constexpr size_t kRequestsPerConnection = 10000;

std::string StatusJson(int code, absl::string_view reason, absl::string_view message) {
  nlohmann::json status = {{"kind", "Status"},
                           {"apiVersion", "v1"},
                           {"metadata", nlohmann::json::object()},
                           {"status", code < 300 ? "Success" : "Failure"},
                           {"reason", std::string(reason)},
                           {"message", std::string(message)},
                           {"code", code}};
  return status.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

AuditIntake::AuditIntake(FactSink* sink, runtime::MetricsRegistry* metrics, StreamSink* streams,
                         AuditIntakeOptions options)
    : sink_(sink),
      metrics_(metrics),
      audit_metrics_(metrics),
      streams_(streams),
      options_(options) {}

AuditIntake::~AuditIntake() = default;

void AuditIntake::CountFactIndex() {
  std::unique_lock lock(count_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another request is counting them now
  const absl::Time now = absl::Now();
  if (now < next_count_) return;
  next_count_ = now + options_.fact_index_size_interval;
  absl::StatusOr<int64_t> keys = sink_->CountFacts();
  if (keys.ok()) audit_metrics_.FactIndexSize(*keys);
}

std::optional<AuditResponse> AuditIntake::Precheck(const std::string& method,
                                                   const std::string& path) {
  if (path != kPath) {
    audit_metrics_.RefusedPath();
    return AuditResponse{400, StatusJson(400, "BadRequest",
                                         "the audit webhook path is exactly /audit-webhook and "
                                         "must not include a cluster ID or trailing segment")};
  }
  if (method != "POST") {
    return AuditResponse{
        405, StatusJson(405, "MethodNotAllowed", "the audit webhook accepts POST only")};
  }
  return std::nullopt;
}

AuditResponse AuditIntake::RefuseClient(const std::vector<std::string>& names) {
  audit_metrics_.BodyRefused("client_not_allowed");
  const std::string shown = names.empty() ? "(no name)" : absl::StrJoin(names, ", ");
  runtime::LogWarning("audit client refused: its certificate names no allowed client",
                      {{"names", shown}});
  return {403, StatusJson(403, "Forbidden",
                          absl::StrCat("client certificate (", shown,
                                       ") is not an allowed audit client (--audit_client_names)"))};
}

std::unique_ptr<AuditIntake::Request> AuditIntake::Begin() {
  return std::make_unique<Request>(*this);
}

AuditResponse AuditIntake::Handle(const std::string& method, const std::string& path,
                                  absl::string_view body) {
  if (std::optional<AuditResponse> decided = Precheck(method, path)) return *decided;
  std::unique_ptr<Request> request = Begin();
  request->Feed(body);
  return request->Finish();
}

AuditIntake::Request::Request(AuditIntake& intake)
    : intake_(intake), reader_(intake.options_.limits), start_(absl::Now()) {}

AuditIntake::Request::~Request() = default;

bool AuditIntake::Request::Feed(absl::string_view piece) {
  if (stopped_) return false;
  framing_ = reader_.Feed(piece, [this](audit::EventList item) { OnItem(std::move(item)); });
  if (!framing_.ok()) stopped_ = true;
  return !stopped_;
}

void AuditIntake::Request::OnItem(audit::EventList item) {
  if (stopped_) return;  // a write failed: the answer is 500, the rest is not read
  ++items_;
  for (const audit::RefusedEvent& refused : item.refused()) Refuse(refused);
  if (item.empty()) return;
  const audit::AuditEvent& event = item[0];
  const audit::Outcome outcome = audit::Classify(event);
  const audit::ObjectReference& ref = event.object_ref;
  // Events counted per label set, one counter update per set when the request ends: the
  // registry's lookup (a lock and a map of label strings) once per request, not per event.
  auto it = std::find_if(series_.begin(), series_.end(), [&](const Series& s) {
    return s.outcome == outcome && s.verb == event.verb && s.resource == ref.resource &&
           s.group == ref.api_group && s.version == ref.api_version;
  });
  if (it == series_.end()) {
    it = series_.insert(series_.end(),
                        Series{outcome, std::string(ref.api_group), std::string(ref.api_version),
                               std::string(ref.resource), std::string(event.verb)});
  }
  const size_t series = static_cast<size_t>(it - series_.begin());
  if (outcome != audit::Outcome::kQueued) {
    ++series_[series].events;
    return;
  }
  unwritten_.push_back(series);
  const size_t facts_before = facts_.size();
  audit::AppendFacts(event, facts_);
  // The reference counts fact writes per event: one `written`, or one
  // `deletecollection_expanded` however many items the collection named.
  if (facts_.size() > facts_before) {
    ++(event.verb == "deletecollection" ? round_expanded_events_ : round_written_events_);
  }
  if (intake_.streams_ != nullptr) {
    held_bytes_ += item.text_bytes();
    held_.push_back(std::move(item));
    accepted_.push_back(&held_.back()[0]);  // moving a list keeps its events in place
  }                                         // else: facts only, the event's text goes now
  // A long list is written as it goes, once it is known to be an EventList (kube-apiserver
  // sends kind and apiVersion first; a body that does not is held to its end).
  const AuditIntakeOptions& options = intake_.options_;
  if (reader_.looks_like_event_list() &&
      (facts_.size() >= options.write_round_facts || held_bytes_ >= options.write_round_bytes) &&
      !WriteRound()) {
    stopped_ = true;
  }
}

void AuditIntake::Request::Refuse(const audit::RefusedEvent& refused) {
  ++refused_;
  intake_.metrics_
      ->GetCounter("reverser_materializer_audit_events_refused_total",
                   "Audit events skipped because they could not be decoded (the rest of their "
                   "list is recorded), by reason: too_large, too_deep, malformed.",
                   {{"reason", std::string(audit::RefusalLabel(refused.reason))}})
      .Increment();
  const std::string resource = refused.api_group.empty()
                                   ? refused.resource
                                   : absl::StrCat(refused.api_group, "/", refused.resource);
  runtime::LogWarning("audit event refused; the rest of its list is recorded",
                      {{"reason", audit::RefusalLabel(refused.reason)},
                       {"error", refused.message},
                       {"index", static_cast<long long>(refused.index)},
                       {"bytes", static_cast<long long>(refused.bytes)},
                       {"audit_id", refused.audit_id},
                       {"verb", refused.verb},
                       {"resource", resource},
                       {"namespace", refused.namespace_},
                       {"name", refused.name}});
}

bool AuditIntake::Request::WriteRound() {
  absl::Status written = facts_.empty() ? absl::OkStatus() : intake_.sink_->Write(facts_);
  if (written.ok() && intake_.streams_ != nullptr && !accepted_.empty()) {
    written = intake_.streams_->Append(accepted_);
  }
  for (size_t series : unwritten_) {
    ++(written.ok() ? series_[series].events : series_[series].write_errors);
  }
  if (written.ok()) {
    for (const redisstore::AuthorFact& fact : facts_) {
      ++(fact.verb == "deletecollection" ? expanded_written_ : facts_written_);
    }
    written_events_ += round_written_events_;
    expanded_events_ += round_expanded_events_;
  } else {
    write_status_ = written;
    runtime::LogError(
        "audit events not stored; answering 500 so the API server retries",
        {{"error", written.ToString()}, {"facts", static_cast<long long>(facts_.size())}});
  }
  unwritten_.clear();
  facts_.clear();
  round_written_events_ = 0;
  round_expanded_events_ = 0;
  accepted_.clear();
  held_.clear();
  held_bytes_ = 0;
  return written.ok();
}

void AuditIntake::Request::CountSeries() {
  runtime::MetricsRegistry& metrics = *intake_.metrics_;
  auto count = [&](const Series& s, const std::string& outcome, const std::string& category,
                   int64_t events) {
    if (events == 0) return;
    metrics
        .GetCounter("gitopsreverser_audit_events_total", "Audit events by outcome.",
                    {{"outcome", outcome},
                     {"category", category},
                     {"group", s.group},
                     {"version", s.version},
                     {"resource", s.resource},
                     {"verb", s.verb}})
        .Increment(static_cast<double>(events));
  };
  for (const Series& s : series_) {
    count(s, std::string(audit::OutcomeLabel(s.outcome)),
          std::string(audit::OutcomeCategory(s.outcome)), s.events);
    count(s, "write_error", "error", s.write_errors);
  }
  if (written_events_ > 0) intake_.audit_metrics_.FactEvents("written", written_events_);
  if (expanded_events_ > 0) {
    intake_.audit_metrics_.FactEvents("deletecollection_expanded", expanded_events_);
  }
}

void AuditIntake::Request::Answered(absl::string_view outcome) {
  intake_.audit_metrics_.Answered(outcome, items_, absl::Now() - start_);
  if (facts_written_ + expanded_written_ > 0) intake_.CountFactIndex();
}

AuditResponse AuditIntake::Request::Finish() {
  if (write_status_.ok() && framing_.ok()) framing_ = reader_.Finish();
  if (write_status_.ok() && !framing_.ok()) {
    // Nothing of a body refused as a whole is recorded (the API server resends it).
    Answered("decode_error");
    intake_.audit_metrics_.BodyRefused("malformed");
    runtime::LogWarning("audit eventlist rejected", {{"error", std::string(framing_.message())},
                                                     {"events", static_cast<long long>(items_)}});
    return {400, StatusJson(400, "BadRequest", framing_.message())};
  }
  if (write_status_.ok()) WriteRound();
  CountSeries();
  if (!write_status_.ok()) {
    Answered("process_error");
    return {500, StatusJson(500, "InternalError", "audit events could not be stored")};
  }
  if (items_ == 0) {
    Answered("empty");
    return {200, StatusJson(200, "", "no events")};
  }
  Answered("processed");
  std::string message = absl::StrCat(facts_written_ + expanded_written_, " fact(s) recorded");
  if (refused_ > 0) absl::StrAppend(&message, "; ", refused_, " event(s) refused (see the log)");
  return {200, StatusJson(200, "", message)};
}

AuditResponse AuditIntake::Request::RefuseTooLarge(size_t limit, size_t read) {
  // What was read is recorded all the same (when it showed it is an EventList): those events
  // would be lost when the API server gives up resending.
  if (write_status_.ok() && framing_.ok() && reader_.looks_like_event_list()) WriteRound();
  CountSeries();
  Answered("decode_error");
  intake_.audit_metrics_.BodyRefused("too_large");
  runtime::LogError(
      "audit eventlist larger than --audit_max_body_bytes; answering 413",
      {{"limit", static_cast<long long>(limit)},
       {"read", static_cast<long long>(read)},
       {"events_read", static_cast<long long>(items_)},
       {"facts_recorded", static_cast<long long>(facts_written_ + expanded_written_)}});
  return {413, StatusJson(413, "RequestEntityTooLarge",
                          absl::StrCat("request body exceeds ", limit, " bytes"))};
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
  if (options_.allowed_client_names.empty()) {
    return absl::InvalidArgumentError(
        "--audit_client_names is empty: name the audit client (\"*\" takes any certificate the "
        "CA signed)");
  }
  const size_t limit = options_.max_body_bytes;
  const bool check_names = !options_.insecure && !options_.tls.client_ca_file.empty();
  auto handler = [this, limit, check_names](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
    if (check_names) {
      std::vector<std::string> names = runtime::PeerCertificateNames(req.ssl);
      if (!runtime::AnyNameAllowed(names, options_.allowed_client_names)) {
        reader([](const char*, size_t) { return false; });  // unread; closed after the answer
        AuditResponse out = intake_->RefuseClient(names);
        res.status = out.status;
        res.set_content(out.body, "application/json");
        return;
      }
    }
    std::optional<AuditResponse> decided = intake_->Precheck(req.method, req.path);
    std::unique_ptr<AuditIntake::Request> request = decided ? nullptr : intake_->Begin();
    // A body announced over the limit is refused without reading it.
    size_t announced = 0;
    bool too_large =
        absl::SimpleAtoi(req.get_header_value("Content-Length"), &announced) && announced > limit;
    size_t read = 0;
    // Decoded as it arrives: nothing but the event in progress is held.
    reader([&](const char* data, size_t length) {
      if (too_large || read + length > limit) {
        too_large = true;
        return false;  // stop reading; the connection is closed after the answer
      }
      read += length;
      return request == nullptr || request->Feed(absl::string_view(data, length));
    });
    AuditResponse out = decided     ? *decided
                        : too_large ? request->RefuseTooLarge(limit, read)
                                    : request->Finish();
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
  // No payload limit of httplib's own: the handler above counts and answers (httplib would
  // answer 413 itself, unseen, and first read the whole announced body to skip it).
  // httplib closes a keep-alive connection after 5 requests by default, so the API server paid
  // a full mTLS handshake every 5 batches. Idle connections still close after the keep-alive
  // timeout, which frees their worker thread.
  routes.set_keep_alive_max_count(kRequestsPerConnection);
  auto seconds = [](absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Seconds(d)); };
  routes.set_read_timeout(seconds(options_.read_timeout), 0);
  routes.set_write_timeout(seconds(options_.write_timeout), 0);
  routes.set_keep_alive_timeout(seconds(options_.idle_timeout));
  return server_->Start(options_.listen_address, options_.port);
}

void AuditWebhookServer::Stop() {
  if (server_) server_->Stop();
}

}  // namespace reverser::materializer
