// dtrain-main, the trainer that the dtrain launcher (launcher.cpp) executes: everything lives in
// dtrain_core (app/entry.cpp).
#include "app/entry.hpp"

int main(int argc, char** argv) { return dtrain::dtrain_main(argc, argv); }
