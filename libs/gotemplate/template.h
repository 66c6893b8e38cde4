#pragma once

// A documented subset of Go's text/template, enough for the reference's commit-message
// templates and for validating user-supplied ones with the same verdicts Go would give.
//
// Supported:
//   text and actions `{{ pipeline }}`, trim markers `{{- ` and ` -}}`, comments `{{/* ... */}}`;
//   operands: `.`, field chains `.A.B` (map lookups; a missing key is an error, as with Go's
//   missingkey=error), `$` and variables `$x` / `$x.A`, string literals ("..." and `...`),
//   integers, `true` / `false`, parenthesised pipelines `(len .X)`;
//   pipelines `a | f b` (the left result becomes the last argument) and declarations
//   `{{$x := pipeline}}`;
//   `{{if}}` / `{{else if}}` / `{{else}}` / `{{end}}`, `{{with}}` (+ else),
//   `{{range pipeline}}` and `{{range $i, $e := pipeline}}` over lists and maps (maps in sorted
//   key order, as Go) with `{{else}}` for the empty case;
//   functions `len`, `printf` (verbs %s %d %v %q %t %x %X %%, flags `-` `0` `+`, width), `print`,
//   `index`, `not`, `and`, `or`, `eq`, `ne`.
// Not supported (parse error): `define` / `template` / `block`, `break` / `continue`, methods,
// `nil`, floats, chars, and any other function.
// Errors use Go's exact wording and format: parse errors `template: <name>:<line>: ...`,
// execution errors `template: <name>:<line>:<col>: executing "<name>" at <node>: ...` (line
// 1-based, column a 0-based byte offset, as Go prints them). kubectl_oracle_test checks both
// against kubectl's go-template printer, which is Go's text/template.
//
// Bounded (Go has no such limits; templates come from users, and one shared process runs them):
// nesting is capped at parse time, and an execution stops with ResourceExhausted, positioned
// like any execution error, when it exceeds its range iterations, steps or output bytes (see
// Limits). There are no template calls, so nesting bounds the recursion.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/gotemplate/value.h"

namespace reverser::gotemplate {

// What one template may cost. The defaults leave room for any commit message or path template a
// person writes (a range over a window's thousands of resources included).
struct Limits {
  // Nesting of control structures and parentheses (parse time).
  int max_nesting = 100;
  // Range body executions in one execution, all ranges together.
  int64_t max_iterations = 100'000;
  // Evaluation steps in one execution: each action, command and range iteration is one, and
  // comparing strings costs one more per KiB compared.
  int64_t max_steps = 1'000'000;
  // Bytes written to the output plus bytes of the strings print and printf build (a string
  // doubled in a loop counts although it is never written).
  int64_t max_output_bytes = 1 << 20;
};

class Template {
 public:
  // Parses `text`; InvalidArgument with the position on a syntax error, an unknown function or
  // an undefined variable, or nesting deeper than limits.max_nesting. The limits are kept for
  // Execute.
  static absl::StatusOr<Template> Parse(absl::string_view name, absl::string_view text,
                                        const Limits& limits = {});

  // Runs the template against `data` (the initial `.` and `$`). InvalidArgument on execution
  // errors: a missing map key, a field of a non-map, a wrong argument type, ...;
  // ResourceExhausted beyond the limits' iterations, steps or output bytes.
  absl::StatusOr<std::string> Execute(const Value& data) const;

  const std::string& name() const { return name_; }

  struct Node;  // the parse tree, defined in template.cc

 private:
  Template(std::string name, std::shared_ptr<const std::string> source,
           std::shared_ptr<const Node> root, const Limits& limits)
      : name_(std::move(name)),
        source_(std::move(source)),
        root_(std::move(root)),
        limits_(limits) {}

  std::string name_;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Node> root_;
  Limits limits_;
};

// Parse + Execute.
absl::StatusOr<std::string> Render(absl::string_view name, absl::string_view text,
                                   const Value& data, const Limits& limits = {});

}  // namespace reverser::gotemplate
