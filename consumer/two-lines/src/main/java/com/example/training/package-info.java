/**
 * A user's DJL training program in two versions, plain ({@link
 * com.example.training.PlainDjlTraining}) and with djl-amp ({@link
 * com.example.training.AmpTraining}), built against the installed djl-amp artifacts.
 */
package com.example.training;
