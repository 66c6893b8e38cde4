#include "bench/splicer/workload.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "libs/sanitize/sanitize.h"
#include "tests/fixtures/runfiles.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::bench {
namespace {

using nlohmann::json;

// One object's changing state: `generation` moves its spec (and so its Git content),
// `status_round` only its status.
struct ObjectState {
  int generation = 1;
  int status_round = 0;
  bool live = false;
};

class Generator {
 public:
  Generator(const WorkloadOptions& options, const json& deployment)
      : options_(options), deployment_(deployment) {}

  std::string Namespace(int index) const {
    return absl::StrFormat("team-%02d", index % options_.namespaces);
  }
  std::string Name(int index) const { return absl::StrCat("app-", index); }
  std::string Uid(int index) const {
    return absl::StrFormat("%08x-8dca-44ae-b0ba-6ea26160ac9f", index);
  }

  std::string Body(int index, const ObjectState& state, uint64_t rv) const {
    json o = deployment_;
    auto& meta = o["metadata"];
    meta["name"] = Name(index);
    meta["namespace"] = Namespace(index);
    meta["uid"] = Uid(index);
    meta["resourceVersion"] = absl::StrCat(rv);
    meta["generation"] = state.generation;
    meta["selfLink"] =
        absl::StrCat("/apis/apps/v1/namespaces/", Namespace(index), "/deployments/", Name(index));
    meta["labels"]["app"] = Name(index);
    meta["annotations"]["deployment.kubernetes.io/revision"] = absl::StrCat(state.generation);
    auto& spec = o["spec"];
    spec["replicas"] = 1 + state.generation % 5;
    spec["selector"]["matchLabels"]["app"] = Name(index);
    spec["template"]["metadata"]["labels"]["app"] = Name(index);
    auto& container = spec["template"]["spec"]["containers"][0];
    container["env"] =
        json::array({{{"name", "VERSION"}, {"value", absl::StrCat("v", state.generation)}}});
    auto& status = o["status"];
    status["observedGeneration"] = state.generation;
    status["readyReplicas"] = state.status_round % 5;
    status["updatedReplicas"] = state.status_round % 3;
    return o.dump();
  }

 private:
  const WorkloadOptions& options_;
  const json& deployment_;
};

}  // namespace

absl::StatusOr<json> LoadTemplate() {
  auto dir = testing::TestdataDir();
  if (!dir.ok()) return dir.status();
  const std::string path = *dir + "/k8s/objects/gitops-engine/deployment-live.json";
  auto text = testing::ReadFile(path);
  if (!text.ok()) return text.status();
  json object = json::parse(*text, nullptr, false);
  if (!object.is_object() || !object.contains("spec") || !object["spec"].contains("template")) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a Deployment"));
  }
  return sanitize::RemoveManagedFields(std::move(object));
}

Workload MakeWorkload(const WorkloadOptions& options, const json& deployment) {
  Generator gen(options, deployment);
  Workload w;
  std::mt19937_64 rng(options.seed);
  std::vector<ObjectState> states(options.objects + options.entries);
  std::vector<int> live;  // indices of live objects (swap-remove)
  std::vector<size_t> slot(states.size(), 0);
  auto add_live = [&](int i) {
    states[i].live = true;
    slot[i] = live.size();
    live.push_back(i);
  };
  auto remove_live = [&](int i) {
    states[i].live = false;
    int last = live.back();
    live[slot[i]] = last;
    slot[last] = slot[i];
    live.pop_back();
  };

  uint64_t rv = 0;
  for (int i = 0; i < options.objects; ++i) {
    add_live(i);
    std::string body = gen.Body(i, states[i], ++rv);
    w.bytes += body.size();
    w.checkpoint.emplace(redisstore::ObjectIdentity(gen.Namespace(i), gen.Name(i)),
                         std::move(body));
  }
  w.checkpoint_position = core::StreamPosition::EndOf(rv);

  int next_new = options.objects;
  for (int k = 0; k < options.entries; ++k) {
    redisstore::StreamEntry e;
    e.resource_version = absl::StrCat(++rv);
    const int roll = static_cast<int>(rng() % 10);
    int i;
    if (roll < 2 || live.empty()) {  // 20% creates
      i = next_new++;
      add_live(i);
      e.op = redisstore::ChangeOp::kAdded;
      ++w.creates;
    } else {
      i = live[rng() % live.size()];
      if (roll < 4) {  // 20% deletes (the watch's DELETED carries the last object)
        e.op = redisstore::ChangeOp::kDeleted;
        remove_live(i);
        ++w.deletes;
      } else if (roll < 5) {  // 10% status-only: nothing for Git
        e.op = redisstore::ChangeOp::kModified;
        ++states[i].status_round;
        ++w.status_updates;
      } else {  // 50% spec updates
        e.op = redisstore::ChangeOp::kModified;
        ++states[i].generation;
        ++w.updates;
      }
    }
    e.uid = gen.Uid(i);
    e.namespace_ = gen.Namespace(i);
    e.name = gen.Name(i);
    e.object_json = gen.Body(i, states[i], rv);
    w.bytes += e.object_json.size();
    w.entries.push_back(std::move(e));
  }
  w.live_after = live.size();
  return w;
}

}  // namespace reverser::bench
