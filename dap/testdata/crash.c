#include <stdio.h>
#include <string.h>

/* Run with "spin" it prints ready and loops in spin (a core made by
 * gcore stops there); without it, crash dereferences NULL (SIGSEGV). A
 * watched global, counter, is written by bump. */
volatile int spinning = 1;
int counter = 0;

int spin(int n) {
    int acc = 0;
    while (spinning) {
        acc += n;
    }
    return acc;
}

int crash(int *p) {
    int depth = 7;
    return *p + depth;
}

void bump(int by) {
    counter += by;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "spin") == 0) {
        printf("ready\n");
        fflush(stdout);
        return spin(3);
    }
    if (argc > 1 && strcmp(argv[1], "bump") == 0) {
        bump(1);
        bump(2);
        printf("counter=%d\n", counter);
        return 0;
    }
    return crash(NULL);
}
