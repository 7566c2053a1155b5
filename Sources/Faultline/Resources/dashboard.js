"use strict";
document.getElementById("app").textContent = "Faultline";
