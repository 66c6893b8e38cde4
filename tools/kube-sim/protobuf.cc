#include "tools/kube-sim/protobuf.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/kube-sim/managed_fields.h"

namespace reverser::kubesim {
namespace {

// One wire-format field: number, wire type and payload (varint value or bytes).
struct WireField {
  int number = 0;
  int wire_type = 0;
  uint64_t varint = 0;
  std::string bytes;
};

bool ReadVarint(const std::string& s, size_t& pos, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && pos < s.size(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(s[pos++]);
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

std::optional<std::vector<WireField>> Parse(const std::string& s) {
  std::vector<WireField> fields;
  size_t pos = 0;
  while (pos < s.size()) {
    uint64_t key;
    if (!ReadVarint(s, pos, key)) return std::nullopt;
    WireField f;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.wire_type == 0) {
      if (!ReadVarint(s, pos, f.varint)) return std::nullopt;
    } else if (f.wire_type == 2) {
      uint64_t len;
      if (!ReadVarint(s, pos, len) || len > s.size() - pos) return std::nullopt;
      f.bytes = s.substr(pos, len);
      pos += len;
    } else if (f.wire_type == 1 || f.wire_type == 5) {
      size_t n = f.wire_type == 1 ? 8 : 4;
      if (n > s.size() - pos) return std::nullopt;
      pos += n;  // fixed-width: not used by these kinds
    } else {
      return std::nullopt;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

enum class Kind {
  kString,
  kBytes,  // base64 in JSON
  kInt,
  kBool,
  kTime,         // metav1.Time {seconds, nanos} → RFC 3339
  kStringMap,    // map<string,string>
  kBytesMap,     // map<string,bytes> → base64 values
  kStringList,   // repeated string
  kMessage,      // nested schema
  kMessageList,  // repeated nested schema
};

struct FieldSpec {
  int number;
  const char* name;
  Kind kind;
  const std::vector<FieldSpec>* schema = nullptr;
  // Go pointer fields (*int32, *bool) keep an explicit zero; plain ones are always encoded and
  // a zero there means "unset" (omitempty in JSON).
  bool pointer = false;
};
using Schema = std::vector<FieldSpec>;

const Schema kOwnerReference = {{1, "kind", Kind::kString},
                                {3, "name", Kind::kString},
                                {4, "uid", Kind::kString},
                                {5, "apiVersion", Kind::kString},
                                {6, "controller", Kind::kBool, nullptr, true},
                                {7, "blockOwnerDeletion", Kind::kBool, nullptr, true}};
const Schema kObjectMeta = {{1, "name", Kind::kString},
                            {2, "generateName", Kind::kString},
                            {3, "namespace", Kind::kString},
                            {5, "uid", Kind::kString},
                            {6, "resourceVersion", Kind::kString},
                            {7, "generation", Kind::kInt},
                            {10, "deletionGracePeriodSeconds", Kind::kInt, nullptr, true},
                            {11, "labels", Kind::kStringMap},
                            {12, "annotations", Kind::kStringMap},
                            {13, "ownerReferences", Kind::kMessageList, &kOwnerReference},
                            {14, "finalizers", Kind::kStringList}};
const Schema kObjectReference = {{1, "kind", Kind::kString},
                                 {2, "namespace", Kind::kString},
                                 {3, "name", Kind::kString},
                                 {4, "uid", Kind::kString},
                                 {5, "apiVersion", Kind::kString}};
const Schema kLocalObjectReference = {{1, "name", Kind::kString}};
const Schema kConfigMap = {{1, "metadata", Kind::kMessage, &kObjectMeta},
                           {2, "data", Kind::kStringMap},
                           {3, "binaryData", Kind::kBytesMap},
                           {4, "immutable", Kind::kBool, nullptr, true}};
const Schema kSecret = {{1, "metadata", Kind::kMessage, &kObjectMeta},
                        {2, "data", Kind::kBytesMap},
                        {3, "type", Kind::kString},
                        {4, "stringData", Kind::kStringMap},
                        {5, "immutable", Kind::kBool, nullptr, true}};
const Schema kNamespaceSpec = {{1, "finalizers", Kind::kStringList}};
const Schema kNamespace = {{1, "metadata", Kind::kMessage, &kObjectMeta},
                           {2, "spec", Kind::kMessage, &kNamespaceSpec}};
const Schema kServiceAccount = {{1, "metadata", Kind::kMessage, &kObjectMeta},
                                {2, "secrets", Kind::kMessageList, &kObjectReference},
                                {3, "imagePullSecrets", Kind::kMessageList, &kLocalObjectReference},
                                {4, "automountServiceAccountToken", Kind::kBool, nullptr, true}};

// apps/v1 Deployment, as far as `kubectl create deployment` fills it.
const Schema kEmpty = {};
const Schema kContainerPort = {{1, "name", Kind::kString},
                               {2, "hostPort", Kind::kInt},
                               {3, "containerPort", Kind::kInt},
                               {4, "protocol", Kind::kString},
                               {5, "hostIP", Kind::kString}};
const Schema kEnvVar = {{1, "name", Kind::kString}, {2, "value", Kind::kString}};
const Schema kContainer = {{1, "name", Kind::kString},
                           {2, "image", Kind::kString},
                           {3, "command", Kind::kStringList},
                           {4, "args", Kind::kStringList},
                           {5, "workingDir", Kind::kString},
                           {6, "ports", Kind::kMessageList, &kContainerPort},
                           {7, "env", Kind::kMessageList, &kEnvVar},
                           {8, "resources", Kind::kMessage, &kEmpty},
                           {13, "terminationMessagePath", Kind::kString},
                           {14, "imagePullPolicy", Kind::kString},
                           {20, "terminationMessagePolicy", Kind::kString}};
const Schema kPodSpec = {{2, "containers", Kind::kMessageList, &kContainer},
                         {3, "restartPolicy", Kind::kString},
                         {4, "terminationGracePeriodSeconds", Kind::kInt, nullptr, true},
                         {6, "dnsPolicy", Kind::kString},
                         {7, "nodeSelector", Kind::kStringMap},
                         {8, "serviceAccountName", Kind::kString},
                         {19, "schedulerName", Kind::kString},
                         {20, "initContainers", Kind::kMessageList, &kContainer}};
const Schema kPodTemplateSpec = {{1, "metadata", Kind::kMessage, &kObjectMeta},
                                 {2, "spec", Kind::kMessage, &kPodSpec}};
const Schema kLabelSelector = {{1, "matchLabels", Kind::kStringMap}};
const Schema kDeploymentStrategy = {{1, "type", Kind::kString}};
const Schema kDeploymentSpec = {{1, "replicas", Kind::kInt, nullptr, true},
                                {2, "selector", Kind::kMessage, &kLabelSelector},
                                {3, "template", Kind::kMessage, &kPodTemplateSpec},
                                {4, "strategy", Kind::kMessage, &kDeploymentStrategy},
                                {5, "minReadySeconds", Kind::kInt},
                                {6, "revisionHistoryLimit", Kind::kInt, nullptr, true},
                                {7, "paused", Kind::kBool},
                                {9, "progressDeadlineSeconds", Kind::kInt, nullptr, true}};
const Schema kDeployment = {{1, "metadata", Kind::kMessage, &kObjectMeta},
                            {2, "spec", Kind::kMessage, &kDeploymentSpec}};

const std::map<std::string, const Schema*>& Schemas() {
  static const std::map<std::string, const Schema*> kSchemas = {
      {"v1/ConfigMap", &kConfigMap},
      {"v1/Secret", &kSecret},
      {"v1/Namespace", &kNamespace},
      {"v1/ServiceAccount", &kServiceAccount},
      {"apps/v1/Deployment", &kDeployment}};
  return kSchemas;
}

std::optional<Json> Decode(const std::string& bytes, const Schema& schema);

std::optional<std::pair<std::string, std::string>> MapEntry(const std::string& bytes) {
  auto fields = Parse(bytes);
  if (!fields) return std::nullopt;
  std::pair<std::string, std::string> kv;
  for (const auto& f : *fields) {
    if (f.number == 1) kv.first = f.bytes;
    if (f.number == 2) kv.second = f.bytes;
  }
  return kv;
}

std::optional<Json> Decode(const std::string& bytes, const Schema& schema) {
  auto fields = Parse(bytes);
  if (!fields) return std::nullopt;
  Json out = Json::object();
  for (const auto& f : *fields) {
    const FieldSpec* spec = nullptr;
    for (const auto& s : schema) {
      if (s.number == f.number) spec = &s;
    }
    if (!spec) continue;  // fields this simulator does not model (e.g. managedFields)
    switch (spec->kind) {
      case Kind::kString:
        if (!f.bytes.empty()) out[spec->name] = f.bytes;  // "" means unset, as after defaulting
        break;
      case Kind::kBytes:
        out[spec->name] = absl::Base64Escape(f.bytes);
        break;
      case Kind::kInt:
        if (f.varint != 0 || spec->pointer) out[spec->name] = static_cast<int64_t>(f.varint);
        break;
      case Kind::kBool:
        if (f.varint != 0 || spec->pointer) out[spec->name] = f.varint != 0;
        break;
      case Kind::kTime: {
        auto t = Parse(f.bytes);
        int64_t seconds = 0;
        if (t) {
          for (const auto& tf : *t) {
            if (tf.number == 1) seconds = static_cast<int64_t>(tf.varint);
          }
        }
        out[spec->name] = Rfc3339(absl::FromUnixSeconds(seconds));
        break;
      }
      case Kind::kStringMap:
      case Kind::kBytesMap: {
        auto kv = MapEntry(f.bytes);
        if (!kv) return std::nullopt;
        out[spec->name][kv->first] =
            spec->kind == Kind::kBytesMap ? absl::Base64Escape(kv->second) : kv->second;
        break;
      }
      case Kind::kStringList:
        out[spec->name].push_back(f.bytes);
        break;
      case Kind::kMessage:
      case Kind::kMessageList: {
        auto nested = Decode(f.bytes, *spec->schema);
        if (!nested) return std::nullopt;
        if (spec->kind == Kind::kMessage) {
          out[spec->name] = *nested;
        } else {
          out[spec->name].push_back(*nested);
        }
        break;
      }
    }
  }
  return out;
}

}  // namespace

ApiOr<Json> DecodeKubernetesProtobuf(const std::string& body) {
  static const std::string kMagic("k8s\0", 4);
  if (body.compare(0, 4, kMagic) != 0) {
    return BadRequest("provided object is not a protobuf message: missing the k8s prefix");
  }
  auto unknown = Parse(body.substr(4));
  if (!unknown) return BadRequest("unable to decode protobuf envelope");
  std::string api_version, kind, raw;
  for (const auto& f : *unknown) {
    if (f.number == 1) {
      auto tm = Parse(f.bytes);
      if (!tm) return BadRequest("unable to decode protobuf TypeMeta");
      for (const auto& t : *tm) {
        if (t.number == 1) api_version = t.bytes;
        if (t.number == 2) kind = t.bytes;
      }
    } else if (f.number == 2) {
      raw = f.bytes;
    }
  }
  auto schema = Schemas().find(absl::StrCat(api_version, "/", kind));
  if (schema == Schemas().end()) {
    return UnsupportedMediaType("application/json, application/yaml");
  }
  auto object = Decode(raw, *schema->second);
  if (!object) return BadRequest(absl::StrCat("unable to decode protobuf ", kind));
  (*object)["apiVersion"] = api_version;
  (*object)["kind"] = kind;
  return *object;
}

}  // namespace reverser::kubesim
