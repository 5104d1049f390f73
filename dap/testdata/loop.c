#include <unistd.h>
int tick(int n) {
    int doubled = n * 2;
    (void)doubled;
    return doubled;
}
int main(void) {
    for (int i = 0; ; i++) {
        tick(i);
        usleep(20000);
    }
}
