#include <stdio.h>
int add_numbers(int a, int b) {
    int sum = a + b;
    return sum;
}

int main(void) {
    int x = add_numbers(2, 3);
    int y = add_numbers(x, 10);
    printf("x=%d y=%d\n", x, y);
    return 0;
}
