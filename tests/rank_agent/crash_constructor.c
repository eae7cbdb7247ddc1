/* For crash_app's constructor mode: a library that crashes as it is loaded. */
__attribute__((constructor, used)) void crash_while_loaded(void) { *(volatile int*)0 = 1; }
