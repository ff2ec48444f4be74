//! A Rust program for the tests: std's runtime start-up, a thread, and a known number of
//! 300-byte boxes, some of them leaked on purpose. Prints its truth:
//! `boxes: made=N kept=K size=300`.

#[inline(never)]
fn make_boxes(n: usize) -> Vec<Box<[u8; 300]>> {
    (0..n).map(|i| Box::new([i as u8; 300])).collect()
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let worker = std::thread::spawn(move || make_boxes(n / 2));
    let mut boxes = make_boxes(n - n / 2);
    boxes.extend(worker.join().expect("worker"));
    let kept = boxes.len() / 10;
    let leaked: Vec<Box<[u8; 300]>> = boxes.drain(..kept).collect();
    std::mem::forget(leaked);
    println!("boxes: made={n} kept={kept} size=300");
}
