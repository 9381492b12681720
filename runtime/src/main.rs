mod storage;
fn main() {}
