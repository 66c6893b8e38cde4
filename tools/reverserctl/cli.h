#pragma once

// The command line: global options (where the services are, output format, deadline) and one
// subcommand with its positional arguments, switches and value options. Parsed by hand rather
// than with absl flags so that each subcommand accepts only its own options and has its own
// --help.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace reverser::reverserctl {

enum class OutputFormat { kDefault, kTable, kJson };

// A command option that takes a value: --NAME=VALUE, --NAME VALUE or -SHORT VALUE.
struct ValueOption {
  std::string name;        // e.g. "message"
  std::string short_name;  // e.g. "m"; empty: none
};

struct GlobalOptions {
  std::string addr;                                 // --addr: one address for every service
  std::map<std::string, std::string> service_addr;  // --catalog_addr=..., keyed by service
  std::string endpoints_file;                       // --endpoints_file: one service's file
  std::string endpoints_dir;                        // --endpoints_dir: <dir>/<service>.json
  std::string host = "127.0.0.1";                   // --host: for ports from endpoints files
  absl::Duration timeout = absl::Seconds(5);        // --timeout: deadline of each call
  bool timeout_given = false;  // --timeout was on the line (else a command may use its own)
  // The mesh's mutual TLS (--grpc_tls_ca/--grpc_tls_cert/--grpc_tls_key: a certificate named
  // reverser-admin), or plaintext with --grpc_insecure for a development stack.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // --grpc_tls_server_name: the name the services' certificates are checked against instead of
  // the host dialed (a port-forward dials 127.0.0.1; the certificate names the Service).
  std::string tls_server_name;
  bool insecure = false;
  // Who the operator is, for services that review operators' calls with the Kubernetes API
  // (--admin_auth=kubernetes): --token, else the user of --kubeconfig (--context), else of
  // $KUBECONFIG, the in-cluster service account or ~/.kube/config. Sent only over TLS.
  std::string kubeconfig;
  std::string kube_context;
  std::string token;
  OutputFormat output = OutputFormat::kDefault;  // -o / --output
};

struct Invocation {
  GlobalOptions options;
  std::string command;                        // empty: none given
  std::vector<std::string> args;              // positional arguments after the command
  std::set<std::string> switches;             // boolean command switches given (e.g. "all", "why")
  std::map<std::string, std::string> values;  // command value options given, by long name
  bool help = false;                          // -h / --help anywhere
};

// The four services, in the order the tool lists them.
const std::vector<std::string>& ServiceNames();
bool IsServiceName(const std::string& name);

// Parses argv (without argv[0]). `value_options`: every command's value options, known before
// the command is (options go anywhere); as with switches, the caller checks that the command
// has the ones given. Errors are usage errors (the caller exits 2).
absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& argv,
                                     const std::vector<ValueOption>& value_options = {});

// The global options' help text.
std::string GlobalOptionsHelp();

}  // namespace reverser::reverserctl
