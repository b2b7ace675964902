// libsystemc.so ships a main() that calls sc_main(), so every executable
// linking it must define sc_main. wafersim and the tests start SystemC from
// their own main() (BUILD-NOTES.md, pitfall 6); this weak definition only
// satisfies the linker and is never called.
#include <cstdio>

extern "C" int __attribute__((weak)) sc_main(int, char**) {
  std::fputs("wafersim: sc_main is not an entry point\n", stderr);
  return 3;
}
