#include "libs/sanitize/sanitize.h"

#include "gtest/gtest.h"

namespace reverser::sanitize {
namespace {

using nlohmann::json;

json MustSanitize(const json& object) {
  auto sanitized = Sanitize(object);
  EXPECT_TRUE(sanitized.ok()) << sanitized.status();
  return sanitized.ok() ? *sanitized : json();
}

TEST(SanitizeTest, KeepsIdentityAndPayloadDropsEverythingElse) {
  const json live = json::parse(R"({
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "cm", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                 "generation": 2, "creationTimestamp": "t", "deletionTimestamp": "t",
                 "deletionGracePeriodSeconds": 0, "selfLink": "/x", "managedFields": [{}],
                 "ownerReferences": [{}], "finalizers": ["f"], "generateName": "cm-"},
    "data": {"k": "v"}, "binaryData": {"b": "AA=="}, "immutable": true,
    "stringData": {"s": "x"}, "status": {"x": 1}, "extra": 1})");
  EXPECT_EQ(MustSanitize(live), json::parse(R"({
    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"},
    "data": {"k": "v"}, "binaryData": {"b": "AA=="}})"));
}

TEST(SanitizeTest, KeepsTheListedTopLevelFields) {
  json live = {{"apiVersion", "v1"}, {"kind", "Event"}, {"metadata", {{"name", "e"}}}};
  for (const char* field : {"spec", "data", "binaryData", "rules", "subjects", "roleRef",
                            "webhooks", "template", "involvedObject", "reason", "message",
                            "type", "eventTime"}) {
    live[field] = std::string("value-of-") + field;
  }
  const json sanitized = MustSanitize(live);
  EXPECT_EQ(sanitized.size(), 16u);  // apiVersion, kind, metadata + 13 payload fields
  EXPECT_EQ(sanitized["eventTime"], "value-of-eventTime");
}

TEST(SanitizeTest, NullPayloadIsKeptVerbatimAndNullMetadataFieldsAreAbsent) {
  const json live = json::parse(
      R"({"apiVersion": "v1", "kind": "X", "spec": null,
          "metadata": {"name": "a", "namespace": null, "labels": null}})");
  EXPECT_EQ(MustSanitize(live), json::parse(
      R"({"apiVersion": "v1", "kind": "X", "spec": null, "metadata": {"name": "a"}})"));
}

TEST(SanitizeTest, StripsOperationalLabels) {
  const json live = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
    "name": "a", "labels": {
      "kustomize.toolkit.fluxcd.io/name": "x", "kro.run/owned": "true",
      "applyset.kubernetes.io/part-of": "s", "app.kubernetes.io/instance": "keep",
      "kustomize.toolkit.fluxcd.io": "no-slash-is-not-the-prefix", "app": "web"}}})");
  EXPECT_EQ(MustSanitize(live)["metadata"]["labels"], json::parse(R"({
    "app.kubernetes.io/instance": "keep", "kustomize.toolkit.fluxcd.io": "no-slash-is-not-the-prefix",
    "app": "web"})"));
}

TEST(SanitizeTest, StripsOperationalAnnotationsExactAndByPrefix) {
  const json live = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
    "name": "a", "annotations": {
      "argocd.argoproj.io/tracking-id": "app:/ConfigMap:ns/a",
      "argocd.argoproj.io/installation-id": "i", "kcp.io/cluster": "root",
      "kubectl.kubernetes.io/last-applied-configuration": "{}",
      "control-plane.alpha.kubernetes.io/leader": "l", "deployment.kubernetes.io/revision": "3",
      "autoscaling.alpha.kubernetes.io/conditions": "c", "kustomize.toolkit.fluxcd.io/ssa": "m",
      "applyset.kubernetes.io/tooling": "kubectl/v1",
      "argocd.argoproj.io/sync-wave": "2", "argocd.argoproj.io/tracking-id-x": "keep",
      "kcp.io/other": "keep", "description": "keep"}}})");
  EXPECT_EQ(MustSanitize(live)["metadata"]["annotations"], json::parse(R"({
    "argocd.argoproj.io/sync-wave": "2", "argocd.argoproj.io/tracking-id-x": "keep",
    "kcp.io/other": "keep", "description": "keep"})"));
}

TEST(SanitizeTest, EmptyOrFullyStrippedMapsAndMetadataAreOmitted) {
  const json live = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
    "labels": {}, "annotations": {"kubectl.kubernetes.io/restartedAt": "t"}, "name": ""}})");
  EXPECT_EQ(MustSanitize(live), json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap"})"));
}

TEST(SanitizeTest, KindSpecificDrops) {
  const json service = json::parse(R"({"apiVersion": "v1", "kind": "Service", "spec": {
    "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "healthCheckNodePort": 30000,
    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster",
    "ports": [{"port": 80}], "type": "ClusterIP", "nodeName": "kept-on-service"}})");
  EXPECT_EQ(MustSanitize(service)["spec"], json::parse(
      R"({"ports": [{"port": 80}], "type": "ClusterIP", "nodeName": "kept-on-service"})"));

  const json pod = json::parse(
      R"({"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": "n1", "clusterIP": "kept"}})");
  EXPECT_EQ(MustSanitize(pod)["spec"], json::parse(R"({"clusterIP": "kept"})"));

  const json pvc = json::parse(R"({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
    "spec": {"volumeName": "pv-1", "volumeMode": "Filesystem", "storageClassName": "s"}})");
  EXPECT_EQ(MustSanitize(pvc)["spec"], json::parse(R"({"storageClassName": "s"})"));

  // The reference matches on kind alone, whatever the group.
  const json custom = json::parse(
      R"({"apiVersion": "example.com/v1", "kind": "Service", "spec": {"clusterIP": "x"}})");
  EXPECT_EQ(MustSanitize(custom)["spec"], json::object());

  // A non-map spec is left alone rather than crashing.
  const json odd = json::parse(R"({"apiVersion": "v1", "kind": "Service", "spec": [1]})");
  EXPECT_EQ(MustSanitize(odd)["spec"], json::parse("[1]"));
}

TEST(SanitizeTest, DoesNotModifyItsInput) {
  const json live = json::parse(R"({"apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "s", "uid": "u"}, "spec": {"clusterIP": "1"}})");
  const json copy = live;
  MustSanitize(live);
  EXPECT_EQ(live, copy);
}

TEST(SanitizeTest, RejectsMalformedObjectsWithClearErrors) {
  const auto error_of = [](const char* text) {
    auto result = Sanitize(json::parse(text));
    EXPECT_FALSE(result.ok()) << text;
    return std::string(result.status().message());
  };
  EXPECT_EQ(error_of("[1]"), "a Kubernetes object must be a JSON object, got array");
  EXPECT_EQ(error_of(R"({"kind": "X"})"), "object has no apiVersion");
  EXPECT_EQ(error_of(R"({"apiVersion": "v1"})"), "object has no kind");
  EXPECT_EQ(error_of(R"({"apiVersion": "v1", "kind": ""})"),
            "object kind must be a non-empty string, got \"\"");
  EXPECT_EQ(error_of(R"({"apiVersion": 1, "kind": "X"})"),
            "object apiVersion must be a non-empty string, got 1");
  EXPECT_EQ(error_of(R"({"apiVersion": "v1", "kind": "X", "metadata": "m"})"),
            "metadata must be a map, got string");
  EXPECT_EQ(error_of(R"({"apiVersion": "v1", "kind": "X", "metadata": {"name": 5}})"),
            "metadata.name must be a string, got number");
  EXPECT_EQ(error_of(R"({"apiVersion": "v1", "kind": "X", "metadata": {"labels": []}})"),
            "metadata.labels must be a map, got array");
  EXPECT_EQ(
      error_of(R"({"apiVersion": "v1", "kind": "X", "metadata": {"annotations": {"a": 1}}})"),
      "metadata.annotations[\"a\"] must be a string, got number");
  json deep = json::array();
  for (int i = 0; i < 600; ++i) deep = json::array({deep});
  auto too_deep = Sanitize(json{{"apiVersion", "v1"}, {"kind", "X"}, {"spec", deep}});
  EXPECT_EQ(too_deep.status().message(), "object is nested deeper than 512 levels");
}

TEST(SanitizeTest, ContentHashIsSha256OfGoJson) {
  const json sanitized = json::parse(
      R"({"kind": "ConfigMap", "metadata": {"name": "x"}, "apiVersion": "v1", "data": {"a": "1"}})");
  // sha256 of {"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"name":"x"}}
  EXPECT_EQ(ContentHash(sanitized),
            "0ff5becaa643e1c36cef77c15ec4b98d25e28b465353614348bd6a3699349502");
}

TEST(SanitizeTest, ContentHashIgnoresServerFieldsButSeesContent) {
  json a = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "x", "resourceVersion": "1"}, "data": {"k": "v"}, "status": {}})");
  json b = a;
  b["metadata"]["resourceVersion"] = "2";
  b["metadata"]["annotations"] = {{"kubectl.kubernetes.io/last-applied-configuration", "{}"}};
  EXPECT_EQ(*SanitizedContentHash(a), *SanitizedContentHash(b));
  b["data"]["k"] = "w";
  EXPECT_NE(*SanitizedContentHash(a), *SanitizedContentHash(b));
  EXPECT_FALSE(SanitizedContentHash(json::array()).ok());
}

TEST(SanitizeTest, RemoveManagedFieldsTouchesNothingElse) {
  const json live = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "x", "uid": "u", "managedFields": [{"manager": "kubectl"}]},
    "status": {"s": 1}})");
  json expected = live;
  expected["metadata"].erase("managedFields");
  EXPECT_EQ(RemoveManagedFields(live), expected);
  // Objects without metadata, or that are not objects, pass through unchanged.
  EXPECT_EQ(RemoveManagedFields(json::parse(R"({"a": 1})")), json::parse(R"({"a": 1})"));
  EXPECT_EQ(RemoveManagedFields(json("s")), json("s"));
}

}  // namespace
}  // namespace reverser::sanitize
