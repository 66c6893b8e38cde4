// reverserctl: the admin CLI over the services' gRPC admin APIs. See README.md beside this file;
// the command table is in commands.cc.

#include <iostream>
#include <string>
#include <vector>

#include "tools/reverserctl/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return reverser::reverserctl::Run(args, std::cout, std::cerr);
}
