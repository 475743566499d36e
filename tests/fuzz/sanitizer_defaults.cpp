// Sanitizer defaults baked into the fuzz targets, so that a bare run (no environment) behaves
// like CI: UndefinedBehaviorSanitizer stops at its first report, which libFuzzer then saves as
// a crash, instead of printing it and carrying on. The environment (UBSAN_OPTIONS) still wins.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }
