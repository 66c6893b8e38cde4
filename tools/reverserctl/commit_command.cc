#include "tools/reverserctl/commit_command.h"

#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "libs/core/types.h"
#include "libs/core/utf8.h"
#include "libs/kube/api_error.h"
#include "libs/kube/rest_client.h"
#include "tools/reverserctl/connection.h"
#include "tools/reverserctl/targets.h"

namespace reverser::reverserctl {
namespace {

using nlohmann::json;

constexpr char kWaitingForCloseDelay[] = "WaitingForCloseDelay";
constexpr size_t kMaxMessageCharacters = 1024;  // the CRD's maxLength (code points)
constexpr int kMaxCloseDelaySeconds = 300;      // the CRD's maximum
constexpr absl::Duration kPollInterval = absl::Milliseconds(500);
// Each API request's own bound (RestClientOptions' default), within the whole wait's.
constexpr absl::Duration kMaxRequestTimeout = absl::Seconds(32);

const core::GroupVersionResource& CommitRequests() {
  static const auto* gvr =
      new core::GroupVersionResource{"configbutler.ai", "v1alpha3", "commitrequests"};
  return *gvr;
}

const json& Field(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

std::string StringField(const json& object, const char* key) {
  const json& value = Field(object, key);
  return value.is_string() ? value.get<std::string>() : std::string();
}

// The CRD's pattern, checked here so the user gets a usage error naming the character instead
// of the API server's 422 with the regular expression.
absl::Status CheckMessage(const std::string& message) {
  if (message.empty()) return absl::InvalidArgumentError("-m: the message is empty");
  size_t characters = 0;
  for (size_t i = 0; i < message.size();) {
    char32_t rune = 0;
    size_t length = core::DecodeUtf8(message, i, &rune);
    if (length == 0) return absl::InvalidArgumentError("-m: the message is not valid UTF-8");
    ++characters;
    if ((rune < 0x20 && rune != '\n') || rune == 0x7F) {
      return absl::InvalidArgumentError(
          absl::StrFormat("-m: control character U+%04X at character %d of the message: only "
                          "newlines are allowed",
                          static_cast<uint32_t>(rune), characters));
    }
    i += length;
  }
  if (characters > kMaxMessageCharacters) {
    return absl::InvalidArgumentError(absl::StrCat("-m: the message has ", characters,
                                                   " characters; at most ", kMaxMessageCharacters,
                                                   " are allowed"));
  }
  return absl::OkStatus();
}

int UsageError(const CommandContext& ctx, absl::string_view message) {
  ctx.err << "reverserctl: " << message << "\n";
  return kUsage;
}

int Failed(const CommandContext& ctx, absl::string_view message) {
  ctx.err << "reverserctl: " << message << "\n";
  return kFailed;
}

std::string Dump(const json& object) {
  return object.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// Where the request stands while it has no outcome, for the timeout message.
std::string Progress(const json& commit_request) {
  const json& conditions = Field(Field(commit_request, "status"), "conditions");
  if (conditions.is_array()) {
    for (const json& condition : conditions) {
      if (StringField(condition, "type") != "Ready") continue;
      return absl::StrCat("Ready ", StringField(condition, "status"), " ",
                          StringField(condition, "reason"));
    }
  }
  return "no status yet: is the catalog's CommitRequest controller running?";
}

}  // namespace

absl::StatusOr<CommitSpec> ParseCommitSpec(const std::string& target, const std::string* message,
                                           const std::string* close_delay,
                                           const std::string* name) {
  CommitSpec spec;
  if (!IsTargetName(target)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target \"", target, "\" is not namespace/name"));
  }
  size_t slash = target.find('/');
  spec.namespace_ = target.substr(0, slash);
  spec.target = target.substr(slash + 1);
  if (absl::Status s = core::ValidateNamespaceName(spec.namespace_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("target \"", target, "\": ", s.message()));
  }
  if (absl::Status s = core::ValidateObjectName(spec.target); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("target \"", target, "\": ", s.message()));
  }
  if (message == nullptr) {
    return absl::InvalidArgumentError("commit needs -m MESSAGE, the commit message");
  }
  if (absl::Status s = CheckMessage(*message); !s.ok()) return s;
  spec.message = *message;
  if (close_delay != nullptr) {
    if (!absl::SimpleAtoi(*close_delay, &spec.close_delay_seconds) ||
        spec.close_delay_seconds < 0 || spec.close_delay_seconds > kMaxCloseDelaySeconds) {
      return absl::InvalidArgumentError(absl::StrCat("--close-delay: \"", *close_delay,
                                                     "\" is not a number of seconds from 0 to ",
                                                     kMaxCloseDelaySeconds));
    }
  }
  if (name != nullptr) {
    if (absl::Status s = core::ValidateObjectName(*name); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--name: ", s.message()));
    }
    spec.name = *name;
  }
  return spec;
}

json CommitRequestObject(const CommitSpec& spec) {
  json metadata = {{"namespace", spec.namespace_}};
  if (spec.name.empty()) {
    metadata["generateName"] = spec.target + "-";
  } else {
    metadata["name"] = spec.name;
  }
  return {{"apiVersion", "configbutler.ai/v1alpha3"},
          {"kind", "CommitRequest"},
          {"metadata", std::move(metadata)},
          {"spec",
           {{"targetRef", {{"name", spec.target}}},
            {"message", spec.message},
            {"closeDelaySeconds", spec.close_delay_seconds}}}};
}

const json* TerminalReady(const json& commit_request) {
  const json& conditions = Field(Field(commit_request, "status"), "conditions");
  if (!conditions.is_array()) return nullptr;
  for (const json& condition : conditions) {
    if (StringField(condition, "type") != "Ready") continue;
    std::string reason = StringField(condition, "reason");
    return reason.empty() || reason == kWaitingForCloseDelay ? nullptr : &condition;
  }
  return nullptr;
}

std::string FormatCommitOutcome(const json& commit_request) {
  const json& metadata = Field(commit_request, "metadata");
  const json& status = Field(commit_request, "status");
  std::string line = absl::StrCat("commitrequest ", StringField(metadata, "namespace"), "/",
                                  StringField(metadata, "name"), ":");
  const json* ready = TerminalReady(commit_request);
  std::string reason = ready ? StringField(*ready, "reason") : Progress(commit_request);
  absl::StrAppend(&line, " ", reason);
  if (std::string sha = StringField(status, "sha"); !sha.empty()) absl::StrAppend(&line, " ", sha);
  if (std::string branch = StringField(status, "branch"); !branch.empty()) {
    absl::StrAppend(&line, " on ", branch);
  }
  if (ready != nullptr && reason != "Committed") {
    std::string message = StringField(*ready, "message");
    if (!message.empty()) {
      absl::StrAppend(&line, ": ", absl::StrReplaceAll(message, {{"\r", " "}, {"\n", " "}}));
    }
  }
  return line;
}

int RunCommit(const CommandContext& ctx) {
  const Invocation& inv = ctx.invocation;
  absl::StatusOr<CommitSpec> spec = ParseCommitSpec(inv.args[0], ctx.Value("message"),
                                                    ctx.Value("close-delay"), ctx.Value("name"));
  if (!spec.ok()) return UsageError(ctx, spec.status().message());
  const absl::Time deadline = absl::Now() + inv.options.timeout;
  auto client = KubeClientOf(inv.options, std::min(inv.options.timeout, kMaxRequestTimeout));
  if (!client.ok()) {
    if (absl::IsInvalidArgument(client.status())) {
      return UsageError(ctx, client.status().message());
    }
    return Failed(ctx, client.status().message());
  }
  absl::StatusOr<json> created =
      (*client)->Create(CommitRequests(), spec->namespace_, CommitRequestObject(*spec));
  if (!created.ok()) {
    return Failed(ctx, absl::StrCat("creating a CommitRequest for GitTarget ", inv.args[0], ": ",
                                    DescribeKubeError(created.status())));
  }
  const std::string name = StringField(Field(*created, "metadata"), "name");
  if (ctx.Switch("no-wait")) {
    ctx.out << (ctx.json ? Dump(*created) : name + "\n");
    return kOk;
  }
  const std::string described = absl::StrCat("commitrequest ", spec->namespace_, "/", name);
  json current = *std::move(created);
  for (;;) {
    if (const json* ready = TerminalReady(current)) {
      const bool committed = StringField(*ready, "status") == "True";
      if (ctx.json) {
        ctx.out << Dump(current);
      } else if (committed) {
        ctx.out << FormatCommitOutcome(current) << "\n";
      }
      return committed ? kOk : Failed(ctx, FormatCommitOutcome(current));
    }
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return Failed(ctx, absl::StrCat(described, ": no outcome within ",
                                      absl::FormatDuration(inv.options.timeout), " (",
                                      Progress(current), ")"));
    }
    absl::SleepFor(std::min(kPollInterval, deadline - now));
    absl::StatusOr<json> got = (*client)->Get(CommitRequests(), spec->namespace_, name);
    if (!got.ok()) {
      // A deleted request has no outcome to wait for; anything else (an API server restart, a
      // dropped connection) may pass, so the wait goes on until the deadline.
      if (kube::IsApiNotFound(got.status()) || absl::Now() >= deadline) {
        return Failed(ctx,
                      absl::StrCat("reading ", described, ": ", DescribeKubeError(got.status())));
      }
      continue;
    }
    current = *std::move(got);
  }
}

}  // namespace reverser::reverserctl
