// Placeholder until the agent lands (replaced in this issue).
int main() { return 1; }
