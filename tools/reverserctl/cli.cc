#include "tools/reverserctl/cli.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace reverser::reverserctl {
namespace {

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

// Applies one global option that takes a value; false if `name` is not one.
absl::StatusOr<bool> ApplyGlobal(const std::string& name, const std::string& value,
                                 GlobalOptions* options) {
  if (name == "addr") {
    options->addr = value;
  } else if (absl::EndsWith(name, "_addr") && IsServiceName(name.substr(0, name.size() - 5))) {
    options->service_addr[name.substr(0, name.size() - 5)] = value;
  } else if (name == "endpoints_file") {
    options->endpoints_file = value;
  } else if (name == "endpoints_dir") {
    options->endpoints_dir = value;
  } else if (name == "host") {
    options->host = value;
  } else if (name == "grpc_tls_ca") {
    options->tls_ca = value;
  } else if (name == "grpc_tls_cert") {
    options->tls_cert = value;
  } else if (name == "grpc_tls_key") {
    options->tls_key = value;
  } else if (name == "grpc_tls_server_name") {
    options->tls_server_name = value;
  } else if (name == "kubeconfig") {
    options->kubeconfig = value;
  } else if (name == "context") {
    options->kube_context = value;
  } else if (name == "token") {
    options->token = value;
  } else if (name == "timeout") {
    absl::Duration timeout;
    if (!absl::ParseDuration(value, &timeout) || timeout <= absl::ZeroDuration()) {
      return Usage(absl::StrCat("--timeout: \"", value, "\" is not a positive duration (e.g. 5s)"));
    }
    options->timeout = timeout;
    options->timeout_given = true;
  } else if (name == "o" || name == "output") {
    if (value == "json") {
      options->output = OutputFormat::kJson;
    } else if (value == "table") {
      options->output = OutputFormat::kTable;
    } else {
      return Usage(absl::StrCat("-o: \"", value, "\" is not an output format (table or json)"));
    }
  } else {
    return false;
  }
  if (value.empty()) return Usage(absl::StrCat("--", name, " needs a value"));
  return true;
}

bool TakesValue(const std::string& name) {
  return name == "addr" || name == "endpoints_file" || name == "endpoints_dir" || name == "host" ||
         name == "timeout" || name == "o" || name == "output" || name == "grpc_tls_ca" ||
         name == "grpc_tls_cert" || name == "grpc_tls_key" || name == "grpc_tls_server_name" ||
         name == "kubeconfig" || name == "context" || name == "token" ||
         (absl::EndsWith(name, "_addr") && IsServiceName(name.substr(0, name.size() - 5)));
}

const ValueOption* FindValueOption(const std::vector<ValueOption>& options,
                                   const std::string& name) {
  for (const ValueOption& option : options) {
    if (name == option.name || (!option.short_name.empty() && name == option.short_name)) {
      return &option;
    }
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string>& ServiceNames() {
  static const auto* names =
      new std::vector<std::string>{"catalog", "materializer", "splicer", "gitworker"};
  return *names;
}

bool IsServiceName(const std::string& name) {
  const auto& names = ServiceNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& argv,
                                     const std::vector<ValueOption>& value_options) {
  Invocation inv;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      if (inv.command.empty()) {
        inv.command = arg;
      } else {
        inv.args.push_back(arg);
      }
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = body;
    std::string value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    if (name == "h" || name == "help") {
      inv.help = true;
      continue;
    }
    if (name == "grpc_insecure" && (!has_value || value == "true")) {
      inv.options.insecure = true;
      continue;
    }
    if (TakesValue(name)) {
      if (!has_value) {
        if (i + 1 >= argv.size()) return Usage(absl::StrCat(arg, " needs a value"));
        value = argv[++i];
      }
      auto applied = ApplyGlobal(name, value, &inv.options);
      if (!applied.ok()) return applied.status();
      continue;
    }
    if (const ValueOption* option = FindValueOption(value_options, name)) {
      if (!has_value) {
        if (i + 1 >= argv.size()) return Usage(absl::StrCat(arg, " needs a value"));
        value = argv[++i];
      }
      // A second -m would silently replace the first message: refuse instead.
      if (!inv.values.emplace(option->name, value).second) {
        return Usage(absl::StrCat("--", option->name, " is given twice"));
      }
      continue;
    }
    // Anything else is a command switch; the command checks it is one of its own.
    if (has_value && value != "true") {
      if (value == "false") continue;
      return Usage(absl::StrCat("--", name, " is a switch and takes no value"));
    }
    inv.switches.insert(name);
  }
  return inv;
}

std::string GlobalOptionsHelp() {
  return "Options (anywhere on the line):\n"
         "  --catalog_addr, --materializer_addr, --splicer_addr, --gitworker_addr=HOST:PORT\n"
         "                         the service's gRPC address (default 127.0.0.1:9090)\n"
         "  --addr=HOST:PORT       one address for every service (e.g. a port-forward)\n"
         "  --endpoints_dir=DIR    read <DIR>/<service>.json, the files services write with\n"
         "                         --endpoints_file (deploy/local/stack.py's work directory)\n"
         "  --endpoints_file=FILE  read this one service endpoints file\n"
         "  --host=HOST            host for ports read from endpoints files (default 127.0.0.1)\n"
         "  --timeout=DURATION     deadline of each call (default 5s; for commit, of the\n"
         "                         whole wait: default 7m30s)\n"
         "  -o, --output=table|json  aligned tables (default) or JSON (protobuf JSON; for\n"
         "                         commit, the CommitRequest object)\n"
         "  --grpc_tls_ca=FILE, --grpc_tls_cert=FILE, --grpc_tls_key=FILE\n"
         "                         mutual TLS with the services: the mesh CA and an admin\n"
         "                         certificate named reverser-admin (docs/security.md)\n"
         "  --grpc_tls_server_name=NAME  check the services' certificates against NAME, not\n"
         "                         the host dialed (e.g. over kubectl port-forward)\n"
         "  --grpc_insecure        plaintext, for a stack started with --grpc_insecure\n"
         "  --kubeconfig=FILE, --context=NAME\n"
         "                         whose bearer token to send (default: $KUBECONFIG, the\n"
         "                         in-cluster service account, ~/.kube/config): services\n"
         "                         check it with a TokenReview and RBAC (docs/security.md);\n"
         "                         commit calls that cluster's API as that user\n"
         "  --token=TOKEN          this bearer token instead of the kubeconfig's\n"
         "  -h, --help             this help, or a command's help after the command\n"
         "An address flag beats --addr, which beats endpoints files.\n";
}

}  // namespace reverser::reverserctl
