package kvswatch

// LoadWindow is loadWindow for the tests.
const LoadWindow = loadWindow
