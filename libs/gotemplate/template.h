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

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/gotemplate/value.h"

namespace reverser::gotemplate {

class Template {
 public:
  // Parses `text`; InvalidArgument with the position on a syntax error, an unknown function or
  // an undefined variable.
  static absl::StatusOr<Template> Parse(absl::string_view name, absl::string_view text);

  // Runs the template against `data` (the initial `.` and `$`). InvalidArgument on execution
  // errors: a missing map key, a field of a non-map, a wrong argument type, ...
  absl::StatusOr<std::string> Execute(const Value& data) const;

  const std::string& name() const { return name_; }

  struct Node;  // the parse tree, defined in template.cc

 private:
  Template(std::string name, std::shared_ptr<const std::string> source,
           std::shared_ptr<const Node> root)
      : name_(std::move(name)), source_(std::move(source)), root_(std::move(root)) {}

  std::string name_;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Node> root_;
};

// Parse + Execute.
absl::StatusOr<std::string> Render(absl::string_view name, absl::string_view text,
                                   const Value& data);

}  // namespace reverser::gotemplate
