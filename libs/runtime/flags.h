#pragma once

// The command-line flags every service shares, and the parsing entry point.

#include <string>
#include <vector>

#include "libs/runtime/service_host.h"

namespace reverser::runtime {

// Parses argv with abseil flags (`--help` lists the flags of this service and the shared ones).
// Exits the process on --help or a bad flag, as abseil does. Returns positional arguments.
std::vector<char*> ParseServiceFlags(int argc, char** argv, const std::string& usage);

// ServiceHostOptions from the shared flags.
ServiceHostOptions HostOptionsFromFlags(const std::string& service);

}  // namespace reverser::runtime
