#[test]
fn adds() {
    assert_eq!(sample::add(2, 3), 5);
}
