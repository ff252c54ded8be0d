package main

import "time"

func waitABit() { time.Sleep(100 * time.Millisecond) }
