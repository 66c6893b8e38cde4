// Rough throughput numbers for kube-sim: creates over HTTP (keep-alive) and the time until a
// watcher has seen all of them. Not a test; run: bazel run //tools/kube-sim:kube_sim_bench.

#include <iostream>

#include "absl/time/clock.h"
#include "httplib.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/test_support.h"

int main() {
  using namespace reverser::kubesim;
  auto sim = KubeSim::Start({});
  if (!sim.ok()) return 1;
  const int n = 2000;
  testing::StreamReader watch((*sim)->port(),
                              "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" +
                                  std::to_string((*sim)->CurrentResourceVersion()));
  httplib::Client client("127.0.0.1", (*sim)->port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    Json cm = {{"metadata", {{"name", "cm-" + std::to_string(i)}}}, {"data", {{"k", "v"}}}};
    auto res = client.Post("/api/v1/namespaces/default/configmaps", cm.dump(), "application/json");
    if (!res || res->status != 201) return 2;
  }
  absl::Duration writes = absl::Now() - start;
  for (int i = 0; i < n; ++i) {
    if (watch.Next().empty()) return 3;
  }
  absl::Duration seen = absl::Now() - start;
  std::cout << n << " creates over HTTP: " << absl::ToDoubleMilliseconds(writes) << " ms ("
            << n / absl::ToDoubleSeconds(writes) << "/s); all watch events received after "
            << absl::ToDoubleMilliseconds(seen) << " ms\n";
  absl::Time list_start = absl::Now();
  auto list = client.Get("/api/v1/namespaces/default/configmaps");
  std::cout << "list of " << n << ": " << absl::ToDoubleMilliseconds(absl::Now() - list_start)
            << " ms, " << list->body.size() << " bytes\n";
  return 0;
}
