#include "services/gitworker/target_writer.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/core/proto_convert.h"
#include "libs/core/status.h"
#include "libs/manifest/yaml_writer.h"
#include "libs/sops/crypto.h"
#include "libs/sops/secret_file.h"
#include "nlohmann/json.hpp"
#include "services/gitworker/gitworker_metrics.h"

namespace reverser::gitworker {
namespace {

// The bootstrap texts mean what the reference's bootstrap templates say (docs/behaviour.md,
// Bootstrap files), in our own words.
constexpr char kReadme[] =
    "# GitOps Reverser bootstrap files\n"
    "\n"
    "GitOps Reverser set up this path when it started mirroring into it.\n"
    "\n"
    "Secret encryption with SOPS needs the `.sops.yaml` file. Removing or editing these\n"
    "bootstrap files can stop Secrets from being mirrored.\n";

constexpr char kGitTargetIgnore[] =
    "# .gittargetignore — how to keep files of your own under this GitOps Reverser path.\n"
    "#\n"
    "# This subtree belongs to the operator alone: GitOps Reverser mirrors API state here and\n"
    "# refuses content it does not manage (stray files, scripts, binaries, symlinks). A pattern\n"
    "# below names files the operator must never read, YAML included, so that chosen unmanaged\n"
    "# files can live beside the mirror. The syntax is that of .gitignore.\n"
    "#\n"
    "# Every line ships commented out: nothing is ignored until you opt a file out on purpose,\n"
    "# so the strict default holds. Uncomment or add patterns as you need them.\n"
    "#\n"
    "# WARNING — never ignore a file the operator writes (a mirrored manifest). It could no\n"
    "# longer see its own file, neither update nor delete it, and would write it again and\n"
    "# again. A write whose path a pattern here hides is refused, and patterns that cover the\n"
    "# whole tree (*, **, /, *.yaml, *.yml) are rejected outright: either fails this GitTarget\n"
    "# instead of quietly damaging the mirror.\n"
    "#\n"
    "# Examples (uncomment what you need):\n"
    "#\n"
    "# LICENSE                 # a licence file kept beside the mirror\n"
    "# .gitignore              # a git ignore file maintained by hand\n"
    "# .gitattributes\n"
    "# docs/                   # documentation kept by hand, left alone by the operator\n"
    "# *.md                    # loose Markdown notes\n"
    "# legacy/old-config.yaml  # a YAML file kept in the repository but not managed\n";

// Auxiliary files a sweep never deletes, whatever they contain.
// Every SOPS encryption yields new bytes. To keep re-delivery of an unchanged sensitive object a
// no-op, the file written for (object, recipients) is remembered under a keyed fingerprint and
// reused. In memory only, and bounded (WriterLimits::max_encryption_cache_bytes): after a
// restart, or once an entry was dropped, the next re-delivery re-encrypts once.
class EncryptionCache {
 public:
  static EncryptionCache& Get() {
    static EncryptionCache* cache = new EncryptionCache();
    return *cache;
  }

  // Holds at most `max_bytes` of files (and kMaxEntries of them), dropping the oldest first.
  absl::StatusOr<std::string> Encrypt(const nlohmann::json& object,
                                      const std::vector<std::string>& recipients,
                                      uint64_t max_bytes) {
    GitWorkerMetrics metrics(&runtime::MetricsRegistry::Global());
    absl::StatusOr<std::string> keyed = sops::SecretFingerprint(object, recipients, hmac_key_);
    if (!keyed.ok()) {  // what fails it (a recipient that is no age key) fails the encryption
      metrics.EncryptionAttempted();
      metrics.EncryptionFailed();
      return keyed.status();
    }
    const std::string& fingerprint = *keyed;
    {
      std::lock_guard lock(mu_);
      if (auto it = files_.find(fingerprint); it != files_.end()) {
        metrics.EncryptionReused();
        return it->second;
      }
    }
    metrics.EncryptionAttempted();
    absl::StatusOr<std::string> encrypted = sops::EncryptSecretYaml(object, recipients);
    if (!encrypted.ok()) {
      metrics.EncryptionFailed();
      return encrypted.status();
    }
    metrics.EncryptionSucceeded();
    std::string file = *std::move(encrypted);
    std::lock_guard lock(mu_);
    if (files_.count(fingerprint) || file.size() > max_bytes) return file;
    while (!order_.empty() && (files_.size() >= kMaxEntries || bytes_ + file.size() > max_bytes)) {
      auto oldest = files_.find(order_.front());
      bytes_ -= oldest->second.size();
      files_.erase(oldest);
      order_.pop_front();
    }
    bytes_ += file.size();
    order_.push_back(fingerprint);
    files_[fingerprint] = file;
    return file;
  }

 private:
  static constexpr size_t kMaxEntries = 20000;
  EncryptionCache() {
    auto key = sops::crypto::SystemRandom().Bytes(32);
    hmac_key_ = key.ok() ? *key : std::string();
  }
  std::mutex mu_;
  std::string hmac_key_;
  std::unordered_map<std::string, std::string> files_;
  std::deque<std::string> order_;  // fingerprints, oldest first
  uint64_t bytes_ = 0;
};

bool IsAllowlisted(absl::string_view path) {
  absl::string_view base =
      path.substr(path.rfind('/') == absl::string_view::npos ? 0 : path.rfind('/') + 1);
  return base == "kustomization.yaml" || base == "kustomization.yml" || base == ".sops.yaml" ||
         base == "Kustomization";
}

manifest::ObjectIdentity IdentityOf(const reverser::v1::ObjectBody& object) {
  manifest::ObjectIdentity id;
  id.gvr = core::FromProto(object.ref().gvr());
  id.kind = object.gvk().kind();
  id.namespace_ = object.ref().namespace_();
  id.scope = id.namespace_.empty() ? core::Scope::kCluster : core::Scope::kNamespaced;
  id.name = object.ref().name();
  id.sensitive = object.sensitive();
  return id;
}

// Why an object could not be read back within the YAML limits (nesting, node count), counted
// without recursion: a deep value must not overflow the stack of whoever walks it next (the SOPS
// encryption, the YAML writer). Empty when it fits.
std::string BeyondYamlLimits(const nlohmann::json& value, const manifest::YamlReadLimits& limits) {
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&value, 0}};
  size_t nodes = 0;
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (depth > limits.max_depth) {
      return absl::StrCat("nested deeper than ", limits.max_depth, " levels");
    }
    // Each key is a node of its own in YAML.
    nodes += node->is_object() ? 1 + node->size() : 1;
    if (nodes > limits.max_nodes) return absl::StrCat("more than ", limits.max_nodes, " nodes");
    if (node->is_structured()) {
      for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
    }
  }
  return "";
}

std::string OperationName(reverser::v1::Operation op) {
  switch (op) {
    case reverser::v1::OPERATION_CREATE:
      return "CREATE";
    case reverser::v1::OPERATION_UPDATE:
      return "UPDATE";
    case reverser::v1::OPERATION_DELETE:
      return "DELETE";
    default:
      return "";
  }
}

}  // namespace

std::string TargetSettings::TargetKey() const {
  return absl::StrCat(target.namespace_(), "/", target.name());
}

absl::StatusOr<std::shared_ptr<const TargetSettings>> SettingsFromConfig(
    const reverser::v1::GitTargetConfig& config, const WriterLimits& limits) {
  auto settings = std::make_shared<TargetSettings>();
  settings->target = config.target();
  settings->destination = config.destination();
  const std::string where =
      absl::StrCat("GitTarget ", config.target().namespace_(), "/", config.target().name(), ": ");
  if (config.target().name().empty()) {
    return absl::InvalidArgumentError("target_config without target name");
  }
  if (config.destination().branch().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "destination.branch is empty"));
  }
  if (config.remote_url().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "remote_url is empty"));
  }
  settings->remote_url = config.remote_url();
  settings->credentials_secret = config.credentials_secret();
  settings->signing_secret = config.signing_secret();
  auto path = manifest::NormalizeTargetPath(config.destination().path());
  if (!path.ok()) return core::Annotate(path.status(), where);
  settings->path = *path;
  commitmeta::Signature committer = commitmeta::DefaultCommitter();
  if (!config.committer_name().empty()) committer.name = config.committer_name();
  if (!config.committer_email().empty()) committer.email = config.committer_email();
  if (!commitmeta::IsSafeSignatureField(committer.name) ||
      !commitmeta::IsSafeSignatureField(committer.email)) {
    return absl::InvalidArgumentError(absl::StrCat(where, "committer identity is not Git-safe"));
  }
  settings->committer = committer;
  if (!config.event_template().empty()) settings->templates.event = config.event_template();
  if (!config.group_template().empty()) settings->templates.group = config.group_template();
  if (!config.reconcile_template().empty()) {
    settings->templates.reconcile = config.reconcile_template();
  }
  if (auto s = commitmeta::ValidateTemplates(settings->templates, limits.templates); !s.ok()) {
    return core::Annotate(s, where);
  }
  if (config.commit_window_ms() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "commit_window_ms is negative"));
  }
  settings->commit_window = absl::Milliseconds(config.commit_window_ms());
  settings->age_recipients.assign(config.age_recipients().begin(), config.age_recipients().end());
  for (const auto& [type, tmpl] : config.placement_by_type()) {
    if (auto s = manifest::ValidatePlacementTemplate(tmpl); !s.ok()) {
      return core::Annotate(s, absl::StrCat(where, "placement.byType[", type, "]"));
    }
    settings->placement_by_type[type] = tmpl;
  }
  if (!config.placement_default().empty()) {
    if (auto s = manifest::ValidatePlacementTemplate(config.placement_default()); !s.ok()) {
      return core::Annotate(s, absl::StrCat(where, "placement.default"));
    }
    settings->placement_default = config.placement_default();
  }
  return std::shared_ptr<const TargetSettings>(std::move(settings));
}

absl::StatusOr<std::string> ObjectPath(const TargetSettings& settings,
                                       const reverser::v1::ObjectBody& object) {
  const manifest::ObjectIdentity id = IdentityOf(object);
  std::string tmpl = settings.placement_default;
  bool by_type = false;
  if (auto it = settings.placement_by_type.find(manifest::PlacementTypeKey(id.gvr));
      it != settings.placement_by_type.end()) {
    tmpl = it->second;
    by_type = true;
  }
  if (auto valid = manifest::ValidateIdentity(id); !valid.ok()) {
    return WithRefusalReason(valid, reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY);
  }
  // A sensitive object is never bundled: only an identity-complete template may place it.
  if (!tmpl.empty() && (!id.sensitive || manifest::IsIdentityComplete(tmpl, by_type))) {
    auto relative = manifest::RenderPlacementTemplate(tmpl, id);
    if (!relative.ok()) {
      return WithRefusalReason(relative.status(), reverser::v1::REFUSAL_REASON_RENDER_FAILED);
    }
    auto joined = manifest::JoinTargetPath(settings.path, *relative);
    if (!joined.ok()) {
      return WithRefusalReason(joined.status(), reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY);
    }
    return joined;
  }
  auto canonical = manifest::CanonicalPath(settings.path, id);
  if (!canonical.ok()) {
    return WithRefusalReason(canonical.status(), reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY);
  }
  return canonical;
}

absl::StatusOr<std::string> RenderObject(const TargetSettings& settings,
                                         const reverser::v1::ObjectBody& object,
                                         const WriterLimits& limits) {
  // Messages say what is wrong; the refusal around them names the object.
  if (object.sensitive() && settings.age_recipients.empty()) {
    return WithRefusalReason(
        absl::FailedPreconditionError("sensitive object not written: no age recipients "
                                      "configured (never written in plaintext)"),
        reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE);
  }
  auto too_large = [&](absl::string_view what, size_t size) {
    return WithRefusalReason(
        absl::ResourceExhaustedError(absl::StrCat(what, " of ", size,
                                                  " bytes not written: more than the file limit "
                                                  "of ",
                                                  limits.max_file_bytes)),
        reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED);
  };
  if (object.sanitized_json().size() > limits.max_file_bytes) {
    return too_large("object", object.sanitized_json().size());
  }
  nlohmann::json body = nlohmann::json::parse(object.sanitized_json(), nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return WithRefusalReason(absl::InvalidArgumentError("sanitized_json is not a JSON object"),
                             reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE);
  }
  if (const std::string beyond = BeyondYamlLimits(body, limits.yaml); !beyond.empty()) {
    return WithRefusalReason(absl::ResourceExhaustedError(absl::StrCat(
                                 "object ", beyond, " not written (it could not be read back)")),
                             reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED);
  }
  absl::StatusOr<std::string> file;
  if (object.sensitive()) {
    file = EncryptionCache::Get().Encrypt(body, settings.age_recipients,
                                          limits.max_encryption_cache_bytes);
    if (!file.ok()) {
      return WithRefusalReason(
          core::Annotate(file.status(), "sensitive object not written"),
          RefusalReasonOf(file.status(), reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE));
    }
  } else {
    file = manifest::RenderManifest(body);
    if (!file.ok()) return WithRefusalReason(file.status(), RefusalReasonOf(file.status()));
  }
  // Never write what the index would refuse to read back.
  if (file->size() > limits.max_file_bytes) return too_large("rendered file", file->size());
  return file;
}

DocumentKey KeyOf(const reverser::v1::ObjectBody& object) {
  DocumentKey key;
  key.group = object.ref().gvr().group();
  key.kind = object.gvk().kind();
  if (key.kind.empty()) {
    nlohmann::json body = nlohmann::json::parse(object.sanitized_json(), nullptr, false);
    if (body.is_object() && body.contains("kind") && body["kind"].is_string()) {
      key.kind = body["kind"].get<std::string>();
    }
  }
  key.namespace_ = object.ref().namespace_();
  key.name = object.ref().name();
  return key;
}

absl::StatusOr<PlannedWrite> PlanEvent(const TargetSettings& settings,
                                       const reverser::v1::LiveEvent& event,
                                       const WriterLimits& limits) {
  PlannedWrite write;
  write.change.operation = OperationName(event.operation());
  if (write.change.operation.empty()) {
    return WithRefusalReason(absl::InvalidArgumentError("event without operation"),
                             reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE);
  }
  const auto& object = event.object();
  write.change.gvr = core::FromProto(object.ref().gvr());
  write.change.namespace_ = object.ref().namespace_();
  write.change.name = object.ref().name();
  write.key = KeyOf(object);
  write.sensitive = object.sensitive();
  ASSIGN_OR_RETURN(write.path, ObjectPath(settings, object));
  if (event.operation() != reverser::v1::OPERATION_DELETE) {
    ASSIGN_OR_RETURN(std::string yaml, RenderObject(settings, object, limits));
    write.content = std::move(yaml);
  }
  return write;
}

PreparedResync PrepareResync(const TargetSettings& settings, reverser::v1::ClusterSnapshot snapshot,
                             const WriterLimits& limits) {
  PreparedResync prepared;
  prepared.gvr = core::FromProto(snapshot.claim().type().gvr());
  prepared.kind = snapshot.claim().type().gvk().kind();
  // The claim should name its kind; otherwise the desired objects tell it.
  for (int i = 0; prepared.kind.empty() && i < snapshot.desired_size(); ++i) {
    prepared.kind = KeyOf(snapshot.desired(i)).kind;
  }
  prepared.sweep = !prepared.kind.empty() && !prepared.gvr.resource.empty();
  if (!prepared.sweep) {
    prepared.refused.push_back(
        {RefusedSubject::Message(), reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE,
         "resync without a type (claim.type.gvk.kind / gvr.resource): objects written, no "
         "sweep"});
  }
  if (snapshot.claim().scope().scope_case() == reverser::v1::WatchScope::kNamespace) {
    prepared.namespace_ = snapshot.claim().scope().namespace_();
  }
  // Objects the splicer could not deliver still exist: their files stay.
  for (const auto& refused : snapshot.refused()) prepared.protected_keys.insert(KeyOf(refused));
  prepared.upserts.reserve(snapshot.desired_size());
  for (auto& object : *snapshot.mutable_desired()) {
    // Swapped out and destroyed at the end of the iteration (Clear() would keep its buffers).
    reverser::v1::ObjectBody rendered;
    rendered.Swap(&object);
    auto path = ObjectPath(settings, rendered);
    if (!path.ok()) {
      prepared.protected_keys.insert(KeyOf(rendered));  // it exists: never swept
      prepared.refused.push_back({RefusedSubject::Object(rendered), RefusalReasonOf(path.status()),
                                  std::string(path.status().message())});
      continue;
    }
    auto yaml = RenderObject(settings, rendered, limits);
    if (!yaml.ok()) {
      prepared.protected_keys.insert(KeyOf(rendered));
      prepared.refused.push_back({RefusedSubject::Object(rendered), RefusalReasonOf(yaml.status()),
                                  std::string(yaml.status().message())});
      continue;
    }
    prepared.upserts.push_back(
        {KeyOf(rendered), *std::move(path), *std::move(yaml), rendered.sensitive()});
  }
  return prepared;
}

ResyncChanges PlanResyncChanges(const IdentityIndex& index, const PreparedResync& prepared,
                                const BlobReader& read, const IndexLimits& limits) {
  ResyncChanges out;
  DocumentEditor editor(index, read, limits);
  for (const auto& upsert : prepared.upserts) {
    auto written = editor.Upsert(upsert.key, upsert.path, upsert.yaml, upsert.sensitive);
    if (!written.ok()) {
      out.refused.push_back({upsert.key, written.status()});
      continue;
    }
    ++out.written;
  }
  std::set<DocumentKey> desired = prepared.protected_keys;
  if (prepared.sweep) {
    // Nothing of the type in Git yet (a first mirror): no need to know the desired set.
    const auto existing = index.OfType(prepared.gvr.group, prepared.kind, prepared.namespace_);
    if (!existing.empty()) {
      for (const auto& upsert : prepared.upserts) desired.insert(upsert.key);
    }
    for (const auto& [key, path] : existing) {
      if (desired.count(key) || IsAllowlisted(path)) continue;
      // The index lists only files it read, so a sweep never fails; should it, the document
      // stays (a sweep only ever removes).
      auto removed = editor.Delete(key, path);
      if (removed.ok() && removed->has_value()) out.swept.emplace_back(key, path);
    }
  }
  DocumentEditor::Result done = std::move(editor).Finish();
  for (auto& file : done.refused) {
    for (const DocumentKey& key : file.keys) {
      // A sweep of that file did not happen; a desired object in it was not written.
      auto swept = std::find(out.swept.begin(), out.swept.end(), std::make_pair(key, file.path));
      if (swept != out.swept.end()) {
        out.swept.erase(swept);
        continue;
      }
      out.refused.push_back({key, file.status});
      --out.written;
    }
  }
  out.changes = std::move(done.changes);
  out.documents = std::move(done.documents);
  out.changed_documents = done.changed_documents;
  return out;
}

WindowChanges PlanWindowChanges(const IdentityIndex& index, const std::vector<PlannedWrite>& writes,
                                const BlobReader& read, const IndexLimits& limits) {
  WindowChanges out;
  DocumentEditor editor(index, read, limits);
  std::map<DocumentKey, size_t> by_key;  // a window holds one write per object
  for (size_t i = 0; i < writes.size(); ++i) {
    const PlannedWrite& write = writes[i];
    by_key[write.key] = i;
    absl::Status status;
    if (write.content.has_value()) {
      status = editor.Upsert(write.key, write.path, *write.content, write.sensitive).status();
    } else {
      status = editor.Delete(write.key).status();
    }
    if (!status.ok()) out.refused.emplace(i, std::move(status));
  }
  DocumentEditor::Result done = std::move(editor).Finish();
  for (auto& file : done.refused) {
    for (const DocumentKey& key : file.keys) {
      if (auto it = by_key.find(key); it != by_key.end())
        out.refused.emplace(it->second, file.status);
    }
  }
  out.changes = std::move(done.changes);
  out.documents = std::move(done.documents);
  out.changed_documents = done.changed_documents;
  return out;
}

std::map<std::string, std::string> BootstrapFiles(const TargetSettings& settings) {
  auto under = [&](absl::string_view name) {
    return settings.path.empty() ? std::string(name) : absl::StrCat(settings.path, "/", name);
  };
  std::map<std::string, std::string> files;
  files[under("README.md")] = kReadme;
  files[under(".gittargetignore")] = kGitTargetIgnore;
  if (!settings.age_recipients.empty()) {
    // Invalid recipients fail every sensitive write anyway; the config is then left out.
    if (auto config = sops::BootstrapSopsConfig(settings.age_recipients); config.ok()) {
      files[under(".sops.yaml")] = *config;
    }
  }
  return files;
}

}  // namespace reverser::gitworker
