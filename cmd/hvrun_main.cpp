// Placeholder until the launch loop lands (replaced in this issue).
int main() { return 1; }
