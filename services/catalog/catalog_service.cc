#include "services/catalog/catalog_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/kube/api_error.h"
#include "libs/runtime/caf_thread.h"
#include "libs/runtime/log.h"

namespace reverser::catalog {
namespace {

constexpr char kDiscovery[] = "discovery";
constexpr char kWatches[] = "watches";
constexpr char kCatalog[] = "catalog";

std::vector<double> RefreshBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace

CatalogService::CatalogService(runtime::ServiceHost& host, CatalogServiceOptions options)
    : host_(host),
      options_(std::move(options)),
      grpc_(this),
      admin_(&host, this),
      metrics_(&host.metrics()) {
  if (!options_.reachable) {
    options_.reachable = [](const RemoteEndpoint& e) {
      return CheckReachable(e, absl::Seconds(5));
    };
  }
  if (options_.random == nullptr) options_.random = &sops::crypto::SystemRandom();
}

CatalogService::~CatalogService() { Stop(); }

void CatalogService::Register() {
  host_.AddGrpcService(&grpc_);
  host_.AddGrpcService(&admin_);
  host_.SetComponent(kDiscovery, false, "no discovery pass yet");
  host_.SetComponent(kWatches, false, "not listed yet");
  host_.SetComponent(kCatalog, false, "waiting for the first discovery pass");
}

void CatalogService::Start() {
  if (started_) return;
  started_ = true;
  if (!options_.attribution_webhook.configuration.empty()) {
    // Before the actor: its first claim set is told to the sync from the actor thread.
    attribution_webhook_ = std::make_unique<AttributionWebhookSync>(
        *options_.client, options_.attribution_webhook, &host_.metrics());
    attribution_webhook_->Start();
  }
  actor_ = SpawnCatalogActor(host_.actors(), {options_.clock, options_.state, this});
  inbox_ = std::make_unique<ActorInbox>(actor_);
  status_queue_.Start();
  probe_queue_.Start();
  encryption_queue_.Start();
  discovery_ =
      std::make_unique<DiscoveryLoop>(*options_.client, *inbox_, options_.discovery_period);
  watches_ =
      std::make_unique<ObjectWatches>(*options_.client, *inbox_, [this] { discovery_->Kick(); });
  discovery_->Start();
  watches_->Start();
  CommitAttacher* attacher = options_.commit_attacher.get();
  if (options_.gitworker_routing.enabled) {
    membership::MemberViewOptions view;
    view.service = "gitworker";
    view.namespace_ = options_.gitworker_routing.namespace_;
    view.timing = options_.gitworker_routing.timing;
    view.reflector = options_.gitworker_routing.reflector;
    auto gitworkers = membership::MemberView::Create(*options_.client, view, core::Clock::Real());
    if (gitworkers.ok()) {
      gitworkers_ = std::move(*gitworkers);
      gitworkers_->Start();
      routed_attacher_ = std::make_shared<RoutedCommitAttacher>(
          [this] { return tables_.Current(); }, gitworkers_.get(),
          options_.gitworker_routing.attacher);
      attacher = routed_attacher_.get();
    } else {
      runtime::LogError("the gitworkers' Leases cannot be followed; CommitRequests are not handled",
                        {{"error", gitworkers.status().ToString()}});
      attacher = nullptr;
    }
  }
  if (attacher != nullptr) {
    commit_requests_ = std::make_unique<CommitRequestController>(
        CommitRequestControllerDeps{options_.client.get(), options_.command_authors.get(), attacher,
                                    options_.clock, &host_.metrics()});
    commit_requests_->Start();
  } else {
    runtime::LogInfo("CommitRequests are not handled: no gitworker address");
  }
}

void CatalogService::Stop() {
  if (!started_) return;
  started_ = false;
  // Producers first, then the actor, then the workers it feeds.
  if (commit_requests_) commit_requests_->Stop();
  if (gitworkers_) gitworkers_->Stop();
  watches_->Stop();
  discovery_->Stop();
  runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
  caf::scoped_actor self{host_.actors()};
  self->send_exit(actor_, caf::exit_reason::user_shutdown);
  self->wait_for(actor_);
  status_queue_.Stop();
  probe_queue_.Stop();
  encryption_queue_.Stop();
  if (attribution_webhook_) attribution_webhook_->Stop();
}

void CatalogService::Tick() {
  if (inbox_) inbox_->Tick();
}

void CatalogService::ReportStreamSummary(reverser::v1::StreamSummary summary) {
  if (inbox_) inbox_->Post(SummaryInput{std::move(summary)});
}

void CatalogService::Rescan(RescanCallback done) {
  if (!discovery_) {
    done(absl::UnavailableError("the catalog has not started"));
    return;
  }
  discovery_->Kick(std::move(done));
}

void CatalogService::Publish(const CatalogState& state, const CatalogChanges& changes) {
  auto& metrics = host_.metrics();
  if (changes.types_changed) {
    auto snapshot = std::make_shared<TypeSnapshot>();
    const auto& current = state.catalog().current();
    snapshot->generation = current.generation;
    snapshot->revision = state.registry().revision();
    snapshot->ready = state.registry().Ready();
    snapshot->records = state.TypeRecords(false);
    for (const auto& gv : current.degraded)
      snapshot->degraded_group_versions.push_back(gv.ToString());
    types_.Publish(std::move(snapshot));
  }
  if (changes.tables) {
    tables_.Publish(*changes.tables, state.AllTables());
    metrics_.WatchedTypes(*changes.tables);
  }
  if (changes.claims) {
    claims_.Publish(*changes.claims);
    std::set<core::GroupVersionResource> types;
    for (const auto& c : changes.claims->claims()) {
      types.insert({c.type().gvr().group(), c.type().gvr().version(), c.type().gvr().resource()});
    }
    metrics_.ClaimedTypes(types.size());
    if (attribution_webhook_) attribution_webhook_->SetFollowed(FollowedResources(*changes.claims));
    metrics.GetGauge("reverser_catalog_claims", "Claims (type, scope) published.")
        .Set(changes.claims->claims_size());
    metrics.GetGauge("reverser_catalog_claims_generation", "Generation of the claim set.")
        .Set(changes.claims->generation());
  }
  if (changes.tables_resolved > 0) {
    metrics
        .GetCounter("reverser_catalog_table_resolutions_total", "Watched-type tables recomputed.")
        .Increment(changes.tables_resolved);
  }
  for (const StatusWrite& write : changes.status_writes) WriteStatus(write);
  for (const ProbeRequest& request : changes.probes) {
    ObjectKey key = request.key;
    nlohmann::json provider = request.provider;
    probe_queue_.Submit(key.ToString(), [this, key, provider] {
      ProviderProbe probe =
          ProbeProvider(*options_.client, provider, options_.reachable, options_.clock->Now());
      inbox_->Post(ProbeInput{key, std::move(probe)});
    });
  }
  for (const EncryptionSecretRequest& request : changes.encryption_reads) {
    ReadEncryptionSecretFor(request);
  }

  const auto stats = state.catalog().stats();
  metrics.GetGauge("gitopsreverser_api_catalog_generation", "API resource catalog generation.")
      .Set(stats.generation);
  metrics
      .GetGauge("reverser_catalog_degraded_group_versions",
                "Group/versions whose discovery failed in the last pass.")
      .Set(stats.degraded_group_versions);
  metrics.GetGauge("reverser_catalog_watched_type_tables", "GitTargets with a watched-type table.")
      .Set(state.table_store().Tables().size());
  host_.SetDetail("claims", std::to_string(state.claim_count()));
  host_.SetDetail("tables", std::to_string(state.table_store().Tables().size()));
  host_.SetDetail("tables_generation", std::to_string(state.tables_generation()));
  host_.SetDetail("catalog_generation", std::to_string(stats.generation));
  host_.SetDetail("registry_revision", std::to_string(state.registry().revision()));
  const std::string waiting_for = state.WaitingFor();
  if (waiting_for != last_waiting_for_) {
    runtime::LogInfo(waiting_for.empty() ? "catalog primed" : "catalog waiting",
                     {{"waiting_for", waiting_for}});
    last_waiting_for_ = waiting_for;
  }
  host_.SetComponent(
      kCatalog, state.primed(),
      state.primed() ? "publishing claims and tables" : absl::StrCat("waiting for ", waiting_for));
  UpdateWatchComponent(state);
}

void CatalogService::WriteStatus(const StatusWrite& write) {
  StatusWrite w = write;
  status_queue_.Submit(w.key.ToString(), [this, w] {
    nlohmann::json patch = {{"status", w.status}};
    kube::PatchOptions options;
    options.subresource = "status";
    auto result = options_.client->Patch(GvrOf(w.key.kind), w.key.namespace_, w.key.name,
                                         kube::PatchType::kMerge, patch, options);
    std::string kind(KindName(w.key.kind));
    std::string outcome = result.ok()                            ? "ok"
                          : kube::IsApiNotFound(result.status()) ? "gone"
                                                                 : "error";
    host_.metrics()
        .GetCounter("reverser_catalog_status_writes_total", "Status subresource writes.",
                    {{"kind", kind}, {"outcome", outcome}})
        .Increment();
    if (!result.ok() && outcome == "error") {
      runtime::LogWarning(
          "status write failed",
          {{"object", w.key.ToString()}, {"error", std::string(result.status().message())}});
      inbox_->Post(StatusFailedInput{w.key});
    }
  });
}

void CatalogService::ReadEncryptionSecretFor(const EncryptionSecretRequest& request) {
  encryption_queue_.Submit(request.key.ToString(), [this, request] {
    EncryptionSecretOutcome outcome =
        ReadEncryptionSecret(*options_.client, request, *options_.clock, *options_.random);
    const EncryptionSecretResult& result = outcome.result;
    std::string label = result.ok ? "ok" : result.reason;
    if (outcome.action == EncryptionSecretAction::kCreated) label = "created";
    if (outcome.action == EncryptionSecretAction::kCompleted) label = "completed";
    host_.metrics()
        .GetCounter("reverser_catalog_encryption_secret_reads_total",
                    "Reads of GitTarget age key Secrets, by outcome (ok, created, completed, "
                    "MissingSecret, InvalidConfig).",
                    {{"outcome", label}})
        .Increment();
    const std::string target = request.key.ToString();
    if (result.ok) {
      encryption_failure_logged_.erase(target);
    } else if (encryption_failure_logged_[target] != result.message) {
      encryption_failure_logged_[target] = result.message;
      runtime::LogWarning(
          "encryption not configured",
          {{"object", target},
           {"secret", absl::StrCat(request.secret.namespace_, "/", request.secret.name)},
           {"reason", result.reason},
           {"error", result.message}});
    }
    inbox_->Post(EncryptionSecretInput{request.key, result});
  });
}

void CatalogService::ScanApplied(const CatalogState& state, ScanInput& scan) {
  auto& metrics = host_.metrics();
  const auto& current = state.catalog().current();
  if (!scan.scan.ok()) {
    metrics_.Refreshed("error");
  } else {
    metrics_.Refreshed(current.generation != refreshed_generation_ ? "changed" : "unchanged");
    refreshed_generation_ = current.generation;
    metrics_.CatalogCounts(current, options_.state.registry.watch_policy);
  }
  metrics
      .GetHistogram("gitopsreverser_api_catalog_refresh_duration_seconds",
                    "Duration of a discovery pass.", {}, RefreshBuckets())
      .Observe(absl::ToDoubleSeconds(scan.took));
  std::vector<std::string> degraded;
  for (const auto& gv : current.degraded) degraded.push_back(gv.ToString());
  if (scan.scan.ok()) {
    host_.SetComponent(kDiscovery, true,
                       degraded.empty()
                           ? std::string("complete")
                           : absl::StrCat("degraded: ", absl::StrJoin(degraded, ", ")));
  } else {
    metrics.GetCounter("reverser_catalog_refresh_failures_total", "Failed discovery passes.")
        .Increment();
    host_.SetComponent(kDiscovery, state.registry().Ready(),
                       absl::StrCat("last pass failed: ", scan.scan.status().message()));
  }
  for (auto& done : scan.callbacks) {
    if (!scan.scan.ok()) {
      done(scan.scan.status());
      continue;
    }
    reverser::v1::RescanResponse response;
    response.set_generation(current.generation);
    response.set_types(current.entries.size());
    for (const auto& gv : degraded) response.add_degraded_group_versions(gv);
    done(response);
  }
}

void CatalogService::WatchHealth(const CatalogState& state, ObjectKind kind,
                                 const absl::Status& status) {
  watch_health_[kind] = status;
  UpdateWatchComponent(state);
}

void CatalogService::UpdateWatchComponent(const CatalogState& state) {
  std::vector<std::string> problems;
  for (ObjectKind kind : kAllObjectKinds) {
    auto health = watch_health_.find(kind);
    if (health != watch_health_.end() && !health->second.ok()) {
      problems.push_back(absl::StrCat(KindName(kind), ": ", health->second.message()));
    } else if (!state.synced(kind)) {
      problems.push_back(absl::StrCat(KindName(kind), ": not listed yet"));
    }
  }
  host_.SetComponent(
      kWatches, problems.empty(),
      problems.empty() ? "all kinds listed and watched" : absl::StrJoin(problems, "; "));
}

}  // namespace reverser::catalog
