/* A module for test_code_location: an exported function, and one that is not. */
__attribute__((noinline)) static int hidden_twice(int x) { return 2 * x + 1; }

int code_location_exported(int x) { return hidden_twice(x) * 3; }

typedef int (*Function)(int);
Function code_location_hidden_address(void) { return &hidden_twice; }
